package conformance

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/wait"
)

// The cases of this file call one backend from many goroutines at once, as
// a service does, where an adapter shares round trips among the calls
// (package backend's Pipeline, or a client that pipelines): every reply
// must reach its own caller, whatever happens to the others' calls.

var (
	echoScript = backend.NewScript(`-- KEYS: one, echoed. ARGV: a token, echoed; and "fail" to raise an
-- error reply naming the token instead. Reply: {KEYS[1], ARGV[1]}.
if ARGV[2] == 'fail' then return redis.error_reply('ECHOFAIL ' .. ARGV[1]) end
return {KEYS[1], ARGV[1]}`)

	stallScript = backend.NewScript(`-- KEYS: none, or one that only routes the call to a cluster node.
-- ARGV: milliseconds. Keeps the server busy that long. Reply: 1.
local t = redis.call('TIME')
local stop = t[1] * 1000 + t[2] / 1000 + tonumber(ARGV[1])
repeat t = redis.call('TIME') until t[1] * 1000 + t[2] / 1000 >= stop
return 1`)
)

func (s *suite) sharingRules() []rule {
	return []rule{
		{"SharedCallsOwnReplies", "concurrent calls through one backend, of every context kind, each get their own reply, error replies included", false, s.testSharedOwnReplies},
		{"SharedCallsCancelled", "a call whose context ends while its server is busy returns by then with the context's error, and every later reply still reaches its own caller", true, s.testSharedCancelled},
		{"SharedCallsKilledConnections", "calls in flight on connections the server closes succeed with their own replies or fail with errors dsync retries, and the calls after them succeed", true, s.testSharedKilled},
	}
}

// echo evaluates echoScript for caller g's n-th call and checks that the
// reply is its own: an error, or nil if the reply was right.
func echo(ctx context.Context, b backend.Backend, key string, g, n int, fail bool) error {
	token := fmt.Sprintf("%d/%d", g, n)
	args := []any{token}
	if fail {
		args = append(args, "fail")
	}
	reply, err := b.Eval(ctx, echoScript, []string{key}, args...)
	if fail {
		var se *backend.ServerError
		if !errors.As(err, &se) || se.Message != "ECHOFAIL "+token {
			return &wrongReply{fmt.Sprintf("caller %d, call %d: got %#v, %v; want the error reply ECHOFAIL %s", g, n, reply, err, token)}
		}
		return nil
	}
	if err != nil {
		return err
	}
	if want := []any{key, token}; !reflect.DeepEqual(reply, want) {
		return &wrongReply{fmt.Sprintf("caller %d, call %d: got %#v, want %#v: another call's reply", g, n, reply, want)}
	}
	return nil
}

// wrongReply is a reply that reached the wrong caller, or a wrong reply.
type wrongReply struct{ msg string }

func (e *wrongReply) Error() string { return e.msg }

// sharedKey returns caller g's key: one hash tag per caller, so that on a
// cluster the callers' calls spread over the nodes.
func sharedKey(p string, g int) string { return fmt.Sprintf("{%s:%d}:k", p, g) }

// errorLog reports the first few errors of many goroutines, and counts
// them all.
type errorLog struct {
	t *testing.T
	n atomic.Int64
}

func (l *errorLog) errorf(format string, args ...any) {
	l.t.Helper()
	if l.n.Add(1) <= 10 {
		l.t.Errorf(format, args...)
	}
}

func (s *suite) testSharedOwnReplies(t *testing.T, ctx context.Context) {
	const callers, calls = 200, 10
	b := s.newBackend(t)
	setter, _ := b.(backend.Setter)
	p := prefix()
	log := &errorLog{t: t}
	var wg sync.WaitGroup
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := sharedKey(p, g)
			for n := range calls {
				// Every kind of context dsync passes: one that can be
				// cancelled, a deadline without Done, none at all.
				cctx := ctx
				switch (g + n) % 3 {
				case 1:
					cctx = backend.DeadlineContext(ctx, time.Now().Add(s.bound(30*time.Second)))
				case 2:
					cctx = context.Background()
				}
				if err := echo(cctx, b, key, g, n, (g+n)%5 == 0); err != nil {
					log.errorf("%v", err)
					return
				}
				if setter == nil || n%3 != 0 {
					continue
				}
				// Plain commands share the round trips too.
				skey := fmt.Sprintf("%s:set%d", key, n)
				token := fmt.Sprintf("%d/%d", g, n)
				if ok, err := setter.SetNX(cctx, skey, token, time.Minute); !ok || err != nil {
					log.errorf("caller %d: SetNX of a fresh key: %v, %v; want true", g, ok, err)
					return
				}
				if ok, err := setter.SetNX(cctx, skey, "other", time.Minute); ok || err != nil {
					log.errorf("caller %d: SetNX of a key it set: %v, %v; want false", g, ok, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// testSharedCancelled stalls the server with a script while callers with
// short contexts (cancelled, past a deadline with or without Done) and
// callers with long ones call through the same backend: the short ones
// return by their contexts' end, whether their calls were queued or on the
// wire, and the replies that come after the stall, those of the abandoned
// calls among them, reach their own callers only. A call with a long
// context may fail with an error that dsync retries (rule 10: a client
// may fail the calls queued behind one that timed out), never with
// another's reply.
func (s *suite) testSharedCancelled(t *testing.T, ctx context.Context) {
	const (
		callers, rounds = 40, 2
		// The stall is long beside the bound, so that a caller that waits
		// for the stalled server fails however busy the machine is.
		stall = 600 * time.Millisecond
		short = 30 * time.Millisecond
	)
	b := s.newBackend(t)
	p := prefix()
	log := &errorLog{t: t}
	var retried atomic.Int64
	// own checks a call with a long context.
	own := func(err error, what string) {
		var wrong *wrongReply
		switch {
		case errors.As(err, &wrong) || err != nil && !wait.Transient(err):
			log.errorf("%s: %v", what, err)
		case err != nil:
			retried.Add(1)
		}
	}
	// Warm the client first, as a service's is: rueidis dials the
	// connection that serves a key's slot when a call first needs it, and
	// a call waits for that dial, whose handshake no context bounds.
	var warm sync.WaitGroup
	for g := range callers {
		warm.Add(1)
		go func() {
			defer warm.Done()
			own(echo(ctx, b, sharedKey(p, g), g, 1000, false), "a call before the stall")
		}()
	}
	warm.Wait()
	for round := range rounds {
		stalled := make(chan error, 1)
		go func() {
			_, err := b.Eval(ctx, stallScript, []string{sharedKey(p, 0)}, stall.Milliseconds())
			stalled <- err
		}()
		var wg sync.WaitGroup
		for g := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := sharedKey(p, g)
				n := round * 10
				if g%2 == 1 {
					own(echo(ctx, b, key, g, n, false), "a caller with a long context")
					return
				}
				start := time.Now()
				var cctx context.Context
				var cancel context.CancelFunc = func() {}
				kind := [...]string{"a deadline", "a deadline without Done", "a cancellation"}[g%6/2]
				switch g % 6 {
				case 0:
					cctx, cancel = context.WithTimeout(ctx, short)
				case 2:
					cctx = backend.DeadlineContext(ctx, start.Add(short))
				case 4:
					cctx, cancel = context.WithCancel(ctx)
					time.AfterFunc(short, cancel)
				}
				err := echo(cctx, b, key, g, n, false)
				cancel()
				took := time.Since(start)
				var wrong *wrongReply
				switch {
				case errors.As(err, &wrong):
					log.errorf("%v", err)
				case err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled):
					log.errorf("caller %d: a call with %s that ended: %v, want the context's error", g, kind, err)
				case took > short+s.bound(300*time.Millisecond):
					log.errorf("round %d, caller %d: a call with %s of %v returned after %v (%v): it waited for the stalled server", round, g, kind, short, took, err)
				}
				// The abandoned call's reply may still come: the next
				// call's must be its own.
				own(echo(ctx, b, key, g, n+1, false), "the call after an abandoned one")
			}()
		}
		wg.Wait()
		if err := <-stalled; err != nil && !wait.Transient(err) {
			t.Fatalf("round %d: the stalling script: %v", round, err)
		}
		if log.n.Load() > 0 {
			return
		}
	}
	if n := retried.Load(); n > 0 {
		t.Logf("%d calls with long contexts failed with errors dsync retries", n)
	}
}

// testSharedKilled closes the connections of a backend's calls while many
// goroutines call through it: each call in flight then either succeeds
// with its own reply or fails with an error that dsync retries (no context
// error, since no context ended; not ErrClosed), and each caller's next
// calls succeed after a bounded number of such failures.
func (s *suite) testSharedKilled(t *testing.T, ctx context.Context) {
	s.needHook(t, "KillClients", s.hooks.KillClients != nil)
	const callers, kills = 64, 3
	b := s.newBackend(t)
	p := prefix()
	log := &errorLog{t: t}
	var done, failed atomic.Int64
	stop := make(chan struct{})
	progress := make(chan struct{}, 1)
	var wg sync.WaitGroup
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := sharedKey(p, g)
			cctx := ctx
			if g%2 == 1 {
				cctx = backend.DeadlineContext(ctx, time.Now().Add(s.timeout))
			}
			for n := 0; n < 100000; n++ {
				select {
				case <-stop:
					return
				default:
				}
				err := echo(cctx, b, key, g, n, false)
				var wrong *wrongReply
				switch {
				case err == nil:
					done.Add(1)
					select {
					case progress <- struct{}{}:
					default:
					}
				case errors.As(err, &wrong):
					log.errorf("%v", err)
					return
				case ctx.Err() != nil:
					return
				case wait.Transient(err):
					failed.Add(1)
				default:
					log.errorf("caller %d: a call on a killed connection failed with %v, an error dsync does not retry", g, err)
					return
				}
			}
		}()
	}
	exited := make(chan struct{})
	go func() {
		wg.Wait()
		close(exited)
	}()
	// flowing waits until the callers have made as many calls again.
	flowing := func(what string) {
		for before := done.Load(); done.Load() < before+int64(callers); {
			select {
			case <-progress:
			case <-exited:
				t.Fatalf("%s: the callers stopped (%d calls succeeded, %d failed)", what, done.Load(), failed.Load())
			case <-ctx.Done():
				t.Fatalf("%s: calls stopped flowing (%d succeeded, %d failed)", what, done.Load(), failed.Load())
			}
		}
	}
	for i := range kills {
		flowing(fmt.Sprintf("before kill %d", i+1))
		must(t, s.hooks.KillClients(ctx), "kill client connections")
	}
	flowing("after the kills")
	close(stop)
	<-exited
	t.Logf("%d calls succeeded, %d failed with transport errors, across %d kills", done.Load(), failed.Load(), kills)
	// Every caller's next call succeeds, after a failure or a few (rule
	// 10: a pooled connection the kill closed fails the call that takes it).
	for g := range callers {
		var err error
		for n := 0; n < 100; n++ {
			if err = echo(ctx, b, sharedKey(p, g), g, 1000000+n, false); err == nil || !wait.Transient(err) {
				break
			}
		}
		if err != nil {
			t.Fatalf("caller %d after the kills: %v", g, err)
		}
	}
}
