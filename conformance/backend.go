package conformance

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
)

var (
	publishScript = backend.NewScript(`-- KEYS: none. ARGV: channel, payload.
-- Reply: the number of receivers.
return redis.call('PUBLISH', ARGV[1], ARGV[2])`)

	publishManyScript = backend.NewScript(`-- KEYS: none, or one that only routes the call to a cluster node.
-- ARGV: payload, channel... Reply: the number of receivers, summed.
local n = 0
for i = 2, #ARGV do n = n + redis.call('PUBLISH', ARGV[i], ARGV[1]) end
return n`)
)

// counts reports whether a PUBLISH's receiver count is the server's whole
// count: not on a cluster, where a node counts only its own subscribers
// (a message reaches the others through the cluster bus). Where it is
// not, the suite checks delivery by receipt.
func counts(b backend.Backend) bool { return !backend.IsSharded(b) }

// subscribers returns how many server subscriptions channel has, through
// the Subscribers hook or, on one server, a PUBLISH's receiver count (it
// publishes "x": use it where nobody is subscribed). It reports false if
// the suite cannot tell.
func (s *suite) subscribers(ctx context.Context, b backend.Backend, channel string) (int, bool, error) {
	if s.hooks.Subscribers != nil {
		n, err := s.hooks.Subscribers(ctx, channel)
		return n, true, err
	}
	if !counts(b) {
		return 0, false, nil
	}
	n, err := publish(ctx, b, channel, "x")
	return int(n), true, err
}

// awaitUnsubscribed waits until the server has no subscription to channel
// left: an UNSUBSCRIBE is asynchronous, the server must see it soon.
func (s *suite) awaitUnsubscribed(t *testing.T, ctx context.Context, b backend.Backend, channel string) {
	t.Helper()
	deadline := time.Now().Add(s.bound(5 * time.Second))
	for i := 0; ; i++ {
		n, ok, err := s.subscribers(ctx, b, channel)
		must(t, err, "count subscribers")
		if !ok {
			t.Log("cluster without a Subscribers hook: unsubscription not checked")
			return
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) || i > 1000 {
			t.Fatalf("channel still has %d subscribers after its last subscription closed", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func publish(ctx context.Context, b backend.Backend, channel, payload string) (int64, error) {
	v, err := b.Eval(ctx, publishScript, nil, channel, payload)
	if err != nil {
		return 0, err
	}
	return backend.Int(v)
}

// backendRules are the cases of the backend contract, each with the rule
// of package backend it checks (numbered as in that package's doc).
func (s *suite) backendRules() []rule {
	rs := []rule{
		{"ReplyNormalization", "rule 2: replies are normalized (nil, int64, string, []any, a *ServerError in an array); decoding a wrong shape is ErrUnexpectedReply", false, s.testReplyNormalization},
		{"ScriptErrorReply", "rule 2: an error reply, from the script or a command it runs, is a *ServerError with the server's message", false, s.testScriptErrorReply},
		{"NoScriptFallback", "rule 1: a script the server has not seen runs: EVALSHA falls back to EVAL on NOSCRIPT, unseen by the caller", false, s.testNoScriptFallback},
		{"ScriptFlush", "rule 1: scripts keep running after SCRIPT FLUSH", false, s.testScriptFlush},
		{"SubscribeThenPublish", "rule 3: Subscribe returns once the server confirmed it: a PUBLISH right after it reaches the subscription", false, s.testSubscribeThenPublish},
		{"SharedChannel", "rule 4: subscriptions to one channel share one server subscription, reference-counted; a closed one's Receive is ErrClosed", false, s.testSharedChannel},
		{"Unsubscribe", "rule 4: the last Close of a channel unsubscribes it on the server; subscribing again works", false, s.testUnsubscribe},
		{"ManySubscriptions", "rule 4: 10,000 subscriptions use a bounded number of pub/sub connections, and each receives its message", true, s.testManySubscriptions},
		{"SlowReceiver", "rule 6: a subscription that never reads stalls neither the reader nor the others, and is told of its loss by a gap", false, s.testSlowReceiver},
		{"KillPubSub", "rule 5: a killed pub/sub connection is made again, every channel subscribed again, and every subscription told by a gap, within 1s", true, s.testKillPubSub},
		{"Restart", "rules 5 and 10: after a server restart every subscription gets a gap, and calls succeed after failing at most once per dead pooled connection", true, s.testRestart},
		{"ContextCancelled", "rule 7: a cancelled or expired ctx ends Eval, Subscribe and Receive at once with an error matching ctx.Err(), and the backend stays usable", true, s.testContextCancelled},
		{"DeadlineOnlyContext", "rule 7: a ctx that is never done but has a deadline ends the call by the deadline, and its connection is not reused with a reply unread", true, s.testDeadlineOnlyContext},
		{"Close", "rule 8: Close is idempotent and every later call returns ErrClosed", false, s.testClose},
		{"CloseKeepsCallersClient", "rule 8: Close releases only what the adapter made: the caller's client keeps working", false, s.testCloseKeepsClient},
		{"CloseLeavesNothing", "rule 8: after Close no goroutine the backend started is running and its pub/sub connections have left the server", true, s.testCloseLeavesNothing},
		{"IdlePubSubStaysOneConnection", "rule 4: a pub/sub connection left without subscriptions is kept while idle, not redialled at each health check", true, s.testIdlePubSub},
	}
	rs = append(rs, s.sharingRules()...)
	rs = append(rs, s.setterRules()...)
	return append(rs, s.setPublisherRules()...)
}

var infoStatsScript = backend.NewScript(`-- KEYS: none. Reply: INFO stats.
return redis.call('INFO', 'stats')`)

// connectionsReceived reads the server's count of connections accepted so
// far, from the ConnectionsReceived hook or, on one server, from a script
// if the server reports it to scripts.
func (s *suite) connectionsReceived(ctx context.Context, b backend.Backend) (int64, bool) {
	if s.hooks.ConnectionsReceived != nil {
		n, err := s.hooks.ConnectionsReceived(ctx)
		return n, err == nil
	}
	if !counts(b) {
		return 0, false
	}
	v, err := b.Eval(ctx, infoStatsScript, nil)
	if err != nil {
		return 0, false
	}
	info, _ := v.(string)
	for _, line := range strings.Split(info, "\n") {
		if n, ok := strings.CutPrefix(strings.TrimSpace(line), "total_connections_received:"); ok {
			c, err := strconv.ParseInt(n, 10, 64)
			return c, err == nil
		}
	}
	return 0, false
}

// testIdlePubSub checks that a backend whose last subscription ended keeps
// its connections while idle: its health checks must not fail on a
// connection with no subscription left and redial every interval.
func (s *suite) testIdlePubSub(t *testing.T, ctx context.Context) {
	idle := 3 * s.healthCheck
	b := s.newBackend(t)
	if _, ok := s.connectionsReceived(ctx, b); !ok {
		t.Skip("no ConnectionsReceived hook, and the server reports no total_connections_received to scripts (INFO stats)")
	}
	ch := prefix() + ":idle"
	sub, err := b.Subscribe(ctx, ch)
	must(t, err, "subscribe")
	must(t, sub.Close(), "close")
	s.awaitUnsubscribed(t, ctx, b, ch)
	before, _ := s.connectionsReceived(ctx, b)
	time.Sleep(idle) // time is what is tested: several health-check intervals
	after, _ := s.connectionsReceived(ctx, b)
	if n := after - before; n > 0 {
		t.Errorf("the server accepted %d connections in %v while the backend was idle: it redials", n, idle)
	}
	// And it still subscribes and delivers.
	sub, err = b.Subscribe(ctx, ch)
	must(t, err, "subscribe after idling")
	defer sub.Close()
	if n, err := publish(ctx, b, ch, "again"); err != nil || (counts(b) && n != 1) {
		t.Fatalf("publish after idling: %d receivers, %v", n, err)
	}
	if m, err := receive(ctx, sub, s.bound(5*time.Second)); err != nil || m.Payload != "again" {
		t.Fatalf("receive after idling: %+v, %v", m, err)
	}
}

func (s *suite) testReplyNormalization(t *testing.T, ctx context.Context) {
	b := s.newBackend(t)
	cases := []struct {
		name string
		src  string
		want any
	}{
		{"nil", `return nil`, nil},
		{"false", `return false`, nil},
		{"true", `return true`, int64(1)},
		{"integer", `return 42`, int64(42)},
		{"negative", `return -7`, int64(-7)},
		{"float truncates", `return 3.99`, int64(3)},
		{"bulk", `return 'hello'`, "hello"},
		{"empty bulk", `return ''`, ""},
		{"binary bulk", `return 'a\0b'`, "a\x00b"},
		{"status", `return redis.status_reply('PONG')`, "PONG"},
		{"empty array", `return {}`, []any{}},
		{"array", `return {1, 'two', 3}`, []any{int64(1), "two", int64(3)}},
		{"nested", `return {1, {'a', {2, 'b'}}, redis.status_reply('OK')}`,
			[]any{int64(1), []any{"a", []any{int64(2), "b"}}, "OK"}},
		{"array stops at nil", `return {1, nil, 3}`, []any{int64(1)}},
		{"key and arg", `return {KEYS[1], ARGV[1], ARGV[2]}`, []any{"k", "v", "12"}},
	}
	for _, c := range cases {
		got, err := b.Eval(ctx, backend.NewScript(c.src), []string{"k"}, "v", 12)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %#v, want %#v", c.name, got, c.want)
		}
	}

	// An error nested in an array is a *ServerError element.
	got, err := b.Eval(ctx, backend.NewScript(`return {1, redis.error_reply('MYERR nested')}`), nil)
	must(t, err, "nested error")
	a, err := backend.Array(got, 2)
	must(t, err, "nested error reply")
	if se, ok := a[1].(*backend.ServerError); !ok || se.Message != "MYERR nested" {
		t.Errorf("nested error: got %#v, want *ServerError{MYERR nested}", a[1])
	}

	// Decoding helpers report shape mismatches as ErrUnexpectedReply.
	if _, err := backend.Int("x"); !errors.Is(err, dsync.ErrUnexpectedReply) {
		t.Errorf("backend.Int(\"x\"): %v, want ErrUnexpectedReply", err)
	}
	if _, err := backend.Array(int64(1), 1); !errors.Is(err, dsync.ErrUnexpectedReply) {
		t.Errorf("backend.Array(1): %v, want ErrUnexpectedReply", err)
	}
}

func (s *suite) testScriptErrorReply(t *testing.T, ctx context.Context) {
	b := s.newBackend(t)
	_, err := b.Eval(ctx, backend.NewScript(`return redis.error_reply('MYERR went wrong')`), nil)
	var se *backend.ServerError
	if !errors.As(err, &se) || se.Message != "MYERR went wrong" || se.Prefix() != "MYERR" {
		t.Fatalf("error_reply: got %v (%T), want *ServerError MYERR went wrong", err, err)
	}
	// A failing command inside the script is an error reply too.
	_, err = b.Eval(ctx, backend.NewScript(`return redis.call('INCR', KEYS[1])`), []string{prefix() + ":s"}, "x")
	if err != nil {
		t.Fatalf("INCR of a missing key: %v", err)
	}
	_, err = b.Eval(ctx, backend.NewScript(`redis.call('SET', KEYS[1], 'x'); return redis.call('INCR', KEYS[1])`), []string{prefix() + ":s"})
	if !errors.As(err, &se) {
		t.Fatalf("INCR of a string: got %v (%T), want *ServerError", err, err)
	}
}

func (s *suite) testNoScriptFallback(t *testing.T, ctx context.Context) {
	b := s.newBackend(t)
	// A script the server has never seen: EVALSHA fails with NOSCRIPT and
	// the adapter falls back to EVAL without the caller noticing.
	id := dsync.NewID()
	sc := backend.NewScript(fmt.Sprintf("return '%s'", id))
	for i := 0; i < 2; i++ {
		got, err := b.Eval(ctx, sc, nil)
		must(t, err, "eval %d of a new script", i)
		if got != id {
			t.Fatalf("eval %d: got %v, want %s", i, got, id)
		}
	}
}

func (s *suite) testScriptFlush(t *testing.T, ctx context.Context) {
	s.needHook(t, "FlushScripts", s.hooks.FlushScripts != nil)
	b := s.newBackend(t)
	sc := backend.NewScript(fmt.Sprintf("return {'%s', ARGV[1]}", dsync.NewID()))
	for i := 0; i < 3; i++ {
		got, err := b.Eval(ctx, sc, nil, i)
		must(t, err, "eval %d", i)
		if a, _ := backend.Array(got, 2); a == nil || a[1] != fmt.Sprint(i) {
			t.Fatalf("eval %d: got %#v", i, got)
		}
		must(t, s.hooks.FlushScripts(ctx), "SCRIPT FLUSH")
	}
}

func receive(ctx context.Context, sub backend.Subscription, d time.Duration) (backend.Message, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return sub.Receive(ctx)
}

func (s *suite) testSubscribeThenPublish(t *testing.T, ctx context.Context) {
	b := s.newBackend(t)
	pub := s.newBackend(t)
	// Repeated on fresh channels: each PUBLISH is issued the moment
	// Subscribe returns, with no pause, and must reach the subscriber.
	for i := 0; i < 50; i++ {
		ch := prefix() + ":ch"
		sub, err := b.Subscribe(ctx, ch)
		must(t, err, "subscribe")
		n, err := publish(ctx, pub, ch, "hello")
		must(t, err, "publish")
		if counts(pub) && n < 1 {
			t.Fatalf("round %d: PUBLISH right after Subscribe reached %d receivers", i, n)
		}
		m, err := receive(ctx, sub, s.bound(5*time.Second))
		must(t, err, "receive")
		if m.Gap || m.Channel != ch || m.Payload != "hello" {
			t.Fatalf("round %d: got %+v", i, m)
		}
		sub.Close()
	}
}

func (s *suite) testSharedChannel(t *testing.T, ctx context.Context) {
	b := s.newBackend(t)
	ch := prefix() + ":ch"
	subs := make([]backend.Subscription, 5)
	for i := range subs {
		sub, err := b.Subscribe(ctx, ch)
		must(t, err, "subscribe %d", i)
		subs[i] = sub
	}
	if s.hooks.Subscribers != nil {
		n, err := s.hooks.Subscribers(ctx, ch)
		if err != nil || n != 1 {
			t.Errorf("five subscriptions to one channel on one backend: %d server subscriptions (%v), want 1", n, err)
		}
	}
	n, err := publish(ctx, b, ch, "one")
	must(t, err, "publish")
	if counts(b) && n != 1 {
		t.Errorf("five subscriptions to one channel on one backend: %d server receivers, want 1", n)
	}
	for i, sub := range subs {
		m, err := receive(ctx, sub, s.bound(5*time.Second))
		if err != nil || m.Payload != "one" {
			t.Fatalf("subscription %d: %+v, %v", i, m, err)
		}
	}
	// Closing some keeps the channel for the others.
	for _, sub := range subs[:4] {
		sub.Close()
	}
	_, err = publish(ctx, b, ch, "two")
	must(t, err, "publish")
	if m, err := receive(ctx, subs[4], s.bound(5*time.Second)); err != nil || m.Payload != "two" {
		t.Fatalf("remaining subscription: %+v, %v", m, err)
	}
	if _, err := subs[0].Receive(ctx); !errors.Is(err, dsync.ErrClosed) {
		t.Errorf("Receive on a closed subscription: %v, want ErrClosed", err)
	}
	subs[4].Close()
}

func (s *suite) testUnsubscribe(t *testing.T, ctx context.Context) {
	b := s.newBackend(t)
	ch := prefix() + ":ch"
	sub, err := b.Subscribe(ctx, ch)
	must(t, err, "subscribe")
	must(t, sub.Close(), "close")
	must(t, sub.Close(), "second close")
	s.awaitUnsubscribed(t, ctx, b, ch)
	// Subscribing again works and is confirmed.
	sub, err = b.Subscribe(ctx, ch)
	must(t, err, "resubscribe")
	defer sub.Close()
	if n, err := publish(ctx, b, ch, "again"); err != nil || (counts(b) && n != 1) {
		t.Fatalf("publish after resubscribe: %d receivers, %v", n, err)
	}
	if m, err := receive(ctx, sub, s.bound(5*time.Second)); err != nil || m.Payload != "again" {
		t.Fatalf("after resubscribe: %+v, %v", m, err)
	}
}

func (s *suite) testManySubscriptions(t *testing.T, ctx context.Context) {
	const channels, perChannel = 1000, 10
	b := s.newBackend(t)
	p := prefix()
	names := make([]string, channels)
	for i := range names {
		names[i] = fmt.Sprintf("%s:ch%d", p, i)
	}
	subs := make([]backend.Subscription, channels*perChannel)
	var wg sync.WaitGroup
	errs := make(chan error, len(subs))
	for i := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sub, err := b.Subscribe(ctx, names[i%channels])
			if err != nil {
				errs <- err
				return
			}
			subs[i] = sub
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("subscribe: %v", err)
	}
	defer func() {
		for _, sub := range subs {
			sub.Close()
		}
	}()

	if s.hooks.PubSubClients != nil {
		n, err := s.hooks.PubSubClients(ctx)
		must(t, err, "count pub/sub clients")
		limit, servers := 2, 1
		if backend.IsSharded(b) {
			limit = -1
			if s.hooks.Masters != nil {
				servers, err = s.hooks.Masters(ctx)
				must(t, err, "count masters")
				limit = 2 * servers
			}
		}
		if limit >= 0 && n > limit {
			t.Errorf("%d subscriptions: %d pub/sub connections on %d server(s), want at most %d", len(subs), n, servers, limit)
		}
		t.Logf("%d subscriptions on %d channels: %d pub/sub connection(s)", len(subs), channels, n)
	} else if s.without["PubSubClients"] {
		t.Log("harness provides no PubSubClients hook (WithoutHooks): connection count not checked")
	} else {
		t.Error("harness provides no PubSubClients hook: provide it, or declare conformance.WithoutHooks(\"PubSubClients\")")
	}

	args := make([]any, 0, channels+1)
	args = append(args, "m")
	for _, n := range names {
		args = append(args, n)
	}
	got, err := b.Eval(ctx, publishManyScript, nil, args...)
	must(t, err, "publish")
	if n, _ := backend.Int(got); counts(b) && n != channels {
		t.Errorf("publish to %d channels reached %d server receivers, want one each", channels, n)
	}
	for i, sub := range subs {
		m, err := receive(ctx, sub, s.bound(10*time.Second))
		if err != nil || m.Payload != "m" || m.Channel != names[i%channels] {
			t.Fatalf("subscription %d: %+v, %v", i, m, err)
		}
	}
}

func (s *suite) testSlowReceiver(t *testing.T, ctx context.Context) {
	b := s.newBackend(t)
	p := prefix()
	slow, err := b.Subscribe(ctx, p+":shared")
	must(t, err, "subscribe slow")
	defer slow.Close()
	fast, err := b.Subscribe(ctx, p+":shared")
	must(t, err, "subscribe fast")
	defer fast.Close()
	other, err := b.Subscribe(ctx, p+":other")
	must(t, err, "subscribe other")
	defer other.Close()

	// The slow subscription never reads while 2,000 messages pass; the
	// others receive every one of them, in order. The publisher sends in
	// bursts and waits for the fast receivers between bursts, so they can
	// keep up however busy the machine is, while the slow one falls far
	// beyond any reasonable buffer.
	const n, burst = 2000, 50
	acks := make(chan int, 2*n)
	done := make(chan error, 2)
	for _, sub := range []backend.Subscription{fast, other} {
		go func() {
			for i := 0; i < n; i++ {
				m, err := receive(ctx, sub, s.bound(10*time.Second))
				if err != nil {
					done <- err
					return
				}
				if m.Gap || m.Payload != fmt.Sprint(i) {
					done <- fmt.Errorf("message %d: got %+v", i, m)
					return
				}
				acks <- i
			}
			done <- nil
		}()
	}
	finished := 0
	for i := 0; i < n; i++ {
		// Routed by a key, so that on a cluster every message leaves
		// from the same node: order is promised per publisher only.
		_, err := b.Eval(ctx, publishManyScript, []string{p + ":pub"}, i, p+":shared", p+":other")
		must(t, err, "publish %d", i)
		if (i+1)%burst == 0 {
			for j := 0; j < 2*burst; j++ {
				select {
				case <-acks:
				case err := <-done:
					if err != nil {
						t.Fatal(err)
					}
					finished++
					j--
				case <-ctx.Done():
					t.Fatal(ctx.Err())
				}
			}
		}
	}
	for i := finished; i < 2; i++ {
		if err := within(t, s.bound(20*time.Second), done, "fast receivers"); err != nil {
			t.Fatal(err)
		}
	}
	// The slow one learns that it missed messages.
	sawGap := false
	for i := 0; i < n+1; i++ {
		m, err := receive(ctx, slow, s.bound(time.Second))
		if err != nil {
			break
		}
		if m.Gap {
			sawGap = true
			break
		}
	}
	if !sawGap {
		t.Error("a receiver that fell 2,000 messages behind saw no gap")
	}
}

func (s *suite) testKillPubSub(t *testing.T, ctx context.Context) {
	s.needHook(t, "KillPubSub", s.hooks.KillPubSub != nil)
	b := s.newBackend(t)
	pub := s.newBackend(t)
	p := prefix()
	subs := make([]backend.Subscription, 20)
	for i := range subs {
		sub, err := b.Subscribe(ctx, fmt.Sprintf("%s:ch%d", p, i%5))
		must(t, err, "subscribe")
		defer sub.Close()
		subs[i] = sub
	}
	// The publisher's first call dials and loads its script (on one node
	// of a cluster): before the window, which times the recovery. The window allows for stalls of
	// the test's process (see stallMeter), as measured, and only for them.
	_, err := publish(ctx, pub, p+":warm", "x")
	must(t, err, "publish before the kill")
	meter := meterStalls()
	stopMeter := sync.OnceValue(meter.stop)
	defer stopMeter()
	start := time.Now()
	must(t, s.hooks.KillPubSub(ctx), "kill pub/sub clients")
	for i, sub := range subs {
		m, err := receive(ctx, sub, s.bound(time.Second))
		if err != nil || !m.Gap {
			t.Fatalf("subscription %d after the kill: %+v, %v; want a gap", i, m, err)
		}
	}
	// Every channel is subscribed again by the time its gap arrives.
	for i := 0; i < 5; i++ {
		n, err := publish(ctx, pub, fmt.Sprintf("%s:ch%d", p, i), "after")
		must(t, err, "publish")
		if counts(pub) && n < 1 {
			t.Fatalf("channel %d has no receiver after the gap", i)
		}
	}
	for i, sub := range subs {
		m, err := receive(ctx, sub, s.bound(time.Second))
		if err != nil || m.Payload != "after" {
			t.Fatalf("subscription %d: %+v, %v; want the message published after the reconnect", i, m, err)
		}
	}
	d, stalled := time.Since(start), stopMeter()
	if limit := s.bound(time.Second) + min(meter.stalls(), stallAllowance); d > limit {
		t.Errorf("recovery took %v, want within %v, and as much more as the process stalled (up to %v at once, %v in all), up to %v", d, s.bound(time.Second), stalled, meter.all, stallAllowance)
	}
	t.Logf("gap delivered and messages flowing %v after the kill (the process stalled up to %v, %v in all)", d, stalled, meter.all)
}

func (s *suite) testRestart(t *testing.T, ctx context.Context) {
	s.needHook(t, "Restart", s.hooks.Restart != nil)
	b := s.newBackend(t)
	ch := prefix() + ":ch"
	sub, err := b.Subscribe(ctx, ch)
	must(t, err, "subscribe")
	defer sub.Close()
	sc := backend.NewScript(fmt.Sprintf("return '%s'", dsync.NewID()))
	_, err = b.Eval(ctx, sc, nil)
	must(t, err, "eval before restart")

	must(t, s.hooks.Restart(ctx), "restart")

	m, err := receive(ctx, sub, s.bound(10*time.Second))
	if err != nil || !m.Gap {
		t.Fatalf("after restart: %+v, %v; want a gap", m, err)
	}
	// Pooled connections died with the server; an Eval may fail once per
	// dead connection, then succeeds (and the script cache is empty).
	var evalErr error
	for i := 0; i < 100; i++ {
		if _, evalErr = b.Eval(ctx, sc, nil); evalErr == nil {
			break
		}
	}
	must(t, evalErr, "eval after restart")
	n, err := publish(ctx, b, ch, "back")
	must(t, err, "publish")
	if counts(b) && n != 1 {
		t.Fatalf("publish after restart reached %d receivers", n)
	}
	if m, err := receive(ctx, sub, s.bound(5*time.Second)); err != nil || m.Payload != "back" {
		t.Fatalf("after restart: %+v, %v", m, err)
	}
}

func (s *suite) testContextCancelled(t *testing.T, ctx context.Context) {
	b := s.newBackend(t)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	sc := backend.NewScript(`return 1`)
	if _, err := b.Eval(cctx, sc, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Eval with a cancelled ctx: %v, want context.Canceled", err)
	}
	if _, err := b.Subscribe(cctx, prefix()); !errors.Is(err, context.Canceled) {
		t.Errorf("Subscribe with a cancelled ctx: %v, want context.Canceled", err)
	}
	// A deadline that passes while the script runs.
	dctx, cancel2 := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel2()
	if _, err := b.Eval(dctx, busyScript, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Eval outliving its deadline: %v, want context.DeadlineExceeded", err)
	}
	// A cancellation while the script runs: the call returns at once,
	// not when the reply comes.
	// The bound allows for stalls of the test's process (see stallMeter):
	// the reply comes 200ms after the call, and a call that waits for it
	// is late by itself.
	cctx2, cancel4 := context.WithCancel(ctx)
	timer := time.AfterFunc(50*time.Millisecond, cancel4)
	defer timer.Stop()
	meter := meterStalls()
	start := time.Now()
	_, err := b.Eval(cctx2, busyScript, nil)
	d, stalled := time.Since(start), meter.stop()
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Eval cancelled in flight: %v, want context.Canceled", err)
	} else if d > s.bound(150*time.Millisecond)+meter.stalls() {
		t.Errorf("Eval cancelled after 50ms returned after %v, when its reply came (the process stalled up to %v, %v in all)", d, stalled, meter.all)
	}
	sub, err := b.Subscribe(ctx, prefix())
	must(t, err, "subscribe")
	defer sub.Close()
	rctx, cancel3 := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel3()
	if _, err := sub.Receive(rctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Receive with nothing published: %v, want context.DeadlineExceeded", err)
	}
	// The backend is still usable.
	if _, err := b.Eval(ctx, sc, nil); err != nil {
		t.Errorf("Eval after cancellations: %v", err)
	}
}

// busyScript keeps the server busy for 200ms and returns 1.
var busyScript = backend.NewScript(`local t = redis.call('TIME'); local stop = t[1] * 1000000 + t[2] + 200000
while true do local n = redis.call('TIME'); if n[1] * 1000000 + n[2] > stop then break end end
return 1`)

// testDeadlineOnlyContext checks rule 7 for a context that can never be
// cancelled but has a deadline, as dsync's primitives pass: the call
// returns by the deadline, as if the context could end. A client that
// gives up a call only when its context's Done is closed waits for the
// reply instead; so does one given context.WithTimeout(ctx, d), which
// sets no timer when ctx's deadline is earlier.
func (s *suite) testDeadlineOnlyContext(t *testing.T, ctx context.Context) {
	b := s.newBackend(t)
	// The bound allows for stalls of the test's process (see stallMeter):
	// the reply comes 200ms after the call, and a call that waits for it
	// is late by itself.
	meter := meterStalls()
	start := time.Now()
	dctx := backend.DeadlineContext(ctx, start.Add(50*time.Millisecond))
	_, err := b.Eval(dctx, busyScript, nil)
	took, stalled := time.Since(start), meter.stop()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Eval with a 50ms deadline and no Done, on a 200ms script: %v after %v, want context.DeadlineExceeded", err, took)
	} else if took > s.bound(150*time.Millisecond)+meter.stalls() {
		t.Errorf("Eval with a 50ms deadline and no Done returned after %v, when its reply came (the process stalled up to %v, %v in all)", took, stalled, meter.all)
	}
	// The connection the call gave up did not go back to a pool with the
	// reply still to read.
	id := dsync.NewID()
	for i := 0; i < 5; i++ {
		got, err := b.Eval(ctx, backend.NewScript(fmt.Sprintf("return '%s'", id)), nil)
		must(t, err, "Eval after a call gave up at its deadline")
		if got != id {
			t.Fatalf("Eval after a call gave up at its deadline: got %#v, want %q: a connection was reused with a reply unread", got, id)
		}
	}
}

func (s *suite) testClose(t *testing.T, ctx context.Context) {
	b := s.newBackend(t)
	sub, err := b.Subscribe(ctx, prefix())
	must(t, err, "subscribe")
	received := make(chan error, 1)
	go func() {
		_, err := sub.Receive(ctx)
		received <- err
	}()
	must(t, b.Close(), "close")
	if err := within(t, s.bound(5*time.Second), received, "Receive blocked across Close"); !errors.Is(err, dsync.ErrClosed) {
		t.Errorf("Receive after Close: %v, want ErrClosed", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := b.Eval(ctx, backend.NewScript(`return 1`), nil); !errors.Is(err, dsync.ErrClosed) {
		t.Errorf("Eval after Close: %v, want ErrClosed", err)
	}
	if _, err := b.Subscribe(ctx, prefix()); !errors.Is(err, dsync.ErrClosed) {
		t.Errorf("Subscribe after Close: %v, want ErrClosed", err)
	}
}
