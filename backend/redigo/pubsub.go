package redigo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync/backend"
)

// subscribeBatch bounds the channels named in one SUBSCRIBE when a
// connection is re-established.
const subscribeBatch = 500

// pubsub multiplexes every subscription of a Backend over one connection.
//
// The server's view of a channel is tracked by counting: each SUBSCRIBE sent
// on the current connection adds one pending confirmation, and each
// "subscribe" reply removes one. Replies come in the order commands were
// sent, so when pending reaches zero while the channel is wanted, the last
// SUBSCRIBE has been applied and publishes from then on are delivered.
type pubsub struct {
	b *Backend

	mu      sync.Mutex
	conn    redis.Conn // nil while disconnected
	chans   map[string]*channel
	started bool
	closed  bool
	closing chan struct{} // closed by close
	done    chan struct{} // closed when the reader goroutine exits
	ping    *time.Timer
}

type channel struct {
	subs      map[*subscription]struct{}
	wanted    bool          // the last command for it was SUBSCRIBE
	pending   int           // SUBSCRIBEs awaiting confirmation on this connection
	confirmed bool          // ready is closed
	ready     chan struct{} // closed when the server confirmed
	gapDue    bool          // tell subscribers once re-subscribed after a reconnect
}

func newPubSub(b *Backend) *pubsub {
	return &pubsub{
		b:       b,
		chans:   make(map[string]*channel),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
	}
}

type subscription struct {
	ps   *pubsub
	name string
	box  *backend.Mailbox
	once sync.Once
}

func (s *subscription) Receive(ctx context.Context) (backend.Message, error) {
	return s.box.Receive(ctx)
}

func (s *subscription) Close() error {
	s.once.Do(func() {
		s.ps.remove(s)
		s.box.Close()
	})
	return nil
}

func (ps *pubsub) subscribe(ctx context.Context, name string) (backend.Subscription, error) {
	sub := &subscription{ps: ps, name: name, box: backend.NewMailbox(ps.b.opts.mailboxSize)}

	ps.mu.Lock()
	if ps.closed {
		ps.mu.Unlock()
		return nil, backend.ErrClosed
	}
	if !ps.started {
		ps.started = true
		go ps.run()
	}
	ch := ps.chans[name]
	if ch == nil {
		ch = &channel{subs: make(map[*subscription]struct{}), ready: make(chan struct{})}
		ps.chans[name] = ch
	}
	ch.subs[sub] = struct{}{}
	if !ch.wanted {
		ch.wanted = true
		if ps.conn != nil {
			ps.sendLocked("SUBSCRIBE", name)
			ch.pending++
		}
		// While disconnected, the reconnect subscribes every wanted channel.
	}
	ready := ch.ready
	ps.mu.Unlock()

	select {
	case <-ready:
		return sub, nil
	case <-ctx.Done():
		sub.Close()
		return nil, ctx.Err()
	case <-ps.closing:
		sub.Close()
		return nil, backend.ErrClosed
	}
}

func (ps *pubsub) remove(sub *subscription) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ch := ps.chans[sub.name]
	if ch == nil {
		return
	}
	delete(ch.subs, sub)
	if len(ch.subs) > 0 || !ch.wanted {
		return
	}
	ch.wanted = false
	ch.gapDue = false
	if ch.confirmed {
		ch.confirmed = false
		ch.ready = make(chan struct{})
	}
	if ps.conn != nil && !ps.closed {
		ps.sendLocked("UNSUBSCRIBE", sub.name)
		return // forgotten when the server confirms
	}
	if ch.pending == 0 {
		delete(ps.chans, sub.name)
	}
}

// sendLocked writes one command on the current connection. A failed write
// closes the connection so that the reader notices and reconnects; the
// reconnect re-subscribes from ps.chans, which is already up to date.
func (ps *pubsub) sendLocked(cmd string, args ...any) {
	if err := ps.conn.Send(cmd, args...); err == nil {
		err = ps.conn.Flush()
		if err == nil {
			return
		}
	}
	ps.conn.Close()
}

func (ps *pubsub) close() {
	ps.mu.Lock()
	if ps.closed {
		ps.mu.Unlock()
		return
	}
	ps.closed = true
	close(ps.closing)
	if ps.conn != nil {
		ps.conn.Close()
	}
	if ps.ping != nil {
		ps.ping.Stop()
	}
	for _, ch := range ps.chans {
		for sub := range ch.subs {
			sub.box.Close()
		}
	}
	started := ps.started
	ps.mu.Unlock()
	if started {
		<-ps.done
	}
}

// run owns the connection: it dials, subscribes, reads until the connection
// fails, and starts over until the backend is closed.
func (ps *pubsub) run() {
	defer close(ps.done)
	reconnect := false
	for attempt := 0; ; attempt++ {
		if attempt > 0 && !ps.sleep(ps.backoff(attempt)) {
			return
		}
		conn, err := ps.dial()
		if err != nil {
			continue
		}
		if !ps.attach(conn, reconnect) {
			conn.Close()
			return
		}
		attempt = 0
		reconnect = true
		ps.read(conn)
		ps.detach()
	}
}

func (ps *pubsub) backoff(attempt int) time.Duration {
	d := 10 * time.Millisecond << min(attempt, 10)
	d = min(d, ps.b.opts.maxBackoff)
	return d/2 + rand.N(d/2+1)
}

func (ps *pubsub) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ps.closing:
		return false
	}
}

// dialTimeout bounds one attempt to open the pub/sub connection, and so how
// long Close can wait for an attempt in flight.
const dialTimeout = 2 * time.Second

func (ps *pubsub) dial() (redis.Conn, error) {
	if ps.b.pool.DialContext == nil && ps.b.pool.Dial == nil {
		return nil, errors.New("redigo: the pool has neither Dial nor DialContext")
	}
	if ps.b.pool.DialContext != nil {
		ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
		defer cancel()
		return ps.b.pool.DialContext(ctx)
	}
	return ps.b.pool.Dial()
}

// attach installs a fresh connection and subscribes every wanted channel.
func (ps *pubsub) attach(conn redis.Conn, reconnect bool) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed {
		return false
	}
	ps.conn = conn
	batch := make([]any, 0, subscribeBatch)
	for name, ch := range ps.chans {
		if !ch.wanted {
			delete(ps.chans, name)
			continue
		}
		ch.pending++
		ch.gapDue = reconnect
		batch = append(batch, name)
		if len(batch) == subscribeBatch {
			conn.Send("SUBSCRIBE", batch...)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		conn.Send("SUBSCRIBE", batch...)
	}
	if err := conn.Flush(); err != nil {
		conn.Close() // read fails at once and we reconnect
	}
	ps.schedulePingLocked()
	return true
}

// detach forgets a failed connection: nothing is confirmed any more.
func (ps *pubsub) detach() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.conn.Close()
	ps.conn = nil
	for name, ch := range ps.chans {
		ch.pending = 0
		if !ch.wanted {
			delete(ps.chans, name)
			continue
		}
		if ch.confirmed {
			ch.confirmed = false
			ch.ready = make(chan struct{})
		}
	}
}

func (ps *pubsub) schedulePingLocked() {
	if ps.ping != nil {
		ps.ping.Stop()
	}
	ps.ping = time.AfterFunc(ps.b.opts.healthCheck, ps.sendPing)
}

func (ps *pubsub) sendPing() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed || ps.conn == nil {
		return
	}
	ps.sendLocked("PING")
	ps.ping.Reset(ps.b.opts.healthCheck)
}

func (ps *pubsub) read(conn redis.Conn) {
	timeout := 3 * ps.b.opts.healthCheck
	for {
		reply, err := redis.ReceiveWithTimeout(conn, timeout)
		if err == nil {
			err = ps.dispatch(reply)
		}
		if err != nil {
			// Close before detach takes ps.mu: a writer blocked on this
			// connection while holding ps.mu fails at once.
			conn.Close()
			return
		}
	}
}

// dispatch handles one reply read on the pub/sub connection. It parses
// replies itself rather than through redigo's PubSubConn, which takes the
// +PONG that a PING gets on a connection with no subscription left for an
// error: every idle health check would then cost a reconnection.
func (ps *pubsub) dispatch(reply any) error {
	switch r := reply.(type) {
	case string: // +PONG, outside subscribed mode
		return nil
	case redis.Error:
		return r
	case []any:
		if len(r) == 0 {
			break
		}
		kind, _ := r[0].([]byte)
		switch {
		case string(kind) == "pong":
			return nil
		case string(kind) == "message" && len(r) == 3:
			channel, _ := r[1].([]byte)
			data, _ := r[2].([]byte)
			ps.deliver(string(channel), string(data))
			return nil
		case (string(kind) == "subscribe" || string(kind) == "unsubscribe") && len(r) == 3:
			channel, _ := r[1].([]byte)
			ps.confirm(string(kind), string(channel))
			return nil
		}
	}
	return fmt.Errorf("redigo: unexpected reply on the pub/sub connection: %v", reply)
}

func (ps *pubsub) deliver(name, payload string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ch := ps.chans[name]
	if ch == nil {
		return
	}
	for sub := range ch.subs {
		sub.box.Put(backend.Message{Channel: name, Payload: payload})
	}
}

func (ps *pubsub) confirm(kind, name string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ch := ps.chans[name]
	if ch == nil {
		return
	}
	switch kind {
	case "subscribe":
		if ch.pending > 0 {
			ch.pending--
		}
		if ch.pending > 0 || !ch.wanted {
			return
		}
		if !ch.confirmed {
			ch.confirmed = true
			close(ch.ready)
		}
		if ch.gapDue {
			ch.gapDue = false
			for sub := range ch.subs {
				sub.box.Put(backend.Message{Channel: name, Gap: true})
			}
		}
	case "unsubscribe":
		if !ch.wanted && ch.pending == 0 {
			delete(ps.chans, name)
		}
	}
}
