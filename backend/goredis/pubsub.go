package goredis

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dsyncgo/dsync/backend"
)

// subscribeBatch bounds the channels named in one SUBSCRIBE when a
// connection is re-established.
const subscribeBatch = 500

// sendTimeout bounds one attempt to open the pub/sub connection, or to
// write a command on it, and so how long Close can wait for one in flight.
const sendTimeout = 2 * time.Second

// pubsub multiplexes every subscription of a Backend over one *redis.PubSub.
//
// A *redis.PubSub reconnects by itself after some errors and re-subscribes
// what it remembers, without telling its reader which confirmations belong
// to which connection. The adapter therefore treats each *redis.PubSub as
// one connection: on any error it is closed and replaced, and the
// confirmations of a channel are counted on the current one. Each SUBSCRIBE
// sent adds one pending confirmation, each "subscribe" reply removes one;
// replies come in the order commands were sent, so when pending reaches
// zero while the channel is wanted, the last SUBSCRIBE has been applied and
// publishes from then on are delivered.
type pubsub struct {
	b *Backend
	// node, on a cluster, is a channel whose hash slot's master the
	// connection goes to, found anew at each reconnection (a failover
	// moves it); "" for any node.
	node string

	mu      sync.Mutex
	conn    *redis.PubSub // nil while disconnected
	chans   map[string]*channel
	started bool
	closed  bool
	closing chan struct{} // closed by close
	done    chan struct{} // closed when the reader goroutine exits
}

type channel struct {
	subs      map[*subscription]struct{}
	wanted    bool          // the last command for it was SUBSCRIBE
	pending   int           // SUBSCRIBEs awaiting confirmation on this connection
	confirmed bool          // ready is closed
	ready     chan struct{} // closed when the server confirmed
	gapDue    bool          // tell subscribers once re-subscribed after a reconnect
}

func newPubSub(b *Backend, node string) *pubsub {
	return &pubsub{
		b:       b,
		node:    node,
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
			ch.pending++
			ps.sendLocked(func(ctx context.Context) error { return ps.conn.Subscribe(ctx, name) })
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
		ps.sendLocked(func(ctx context.Context) error { return ps.conn.Unsubscribe(ctx, sub.name) })
		return // forgotten when the server confirms
	}
	if ch.pending == 0 {
		delete(ps.chans, sub.name)
	}
}

// sendLocked writes one command on the current connection; holding ps.mu
// keeps the commands of one channel in order. A failed write closes the
// connection so that the reader notices and replaces it; the replacement
// subscribes from ps.chans, which is already up to date.
func (ps *pubsub) sendLocked(send func(ctx context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), sendTimeout)
	defer cancel()
	if err := send(ctx); err != nil {
		ps.conn.Close()
	}
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

// run owns the connection: it opens one, subscribes, reads until it fails,
// and starts over until the backend is closed.
func (ps *pubsub) run() {
	defer close(ps.done)
	reconnect := false
	for attempt := 0; ; attempt++ {
		if attempt > 0 && !ps.sleep(ps.backoff(attempt)) {
			return
		}
		conn, err := ps.open()
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

// open returns a *redis.PubSub whose connection is established: go-redis
// dials lazily, so a PING makes it dial now, outside ps.mu. Its reply is
// read, and ignored, by the reader.
func (ps *pubsub) open() (*redis.PubSub, error) {
	ctx, cancel := context.WithTimeout(context.Background(), sendTimeout)
	defer cancel()
	var conn *redis.PubSub
	if ps.node == "" {
		conn = ps.b.c.Subscribe(ctx)
	} else {
		m, err := ps.b.c.(*redis.ClusterClient).MasterForKey(ctx, ps.node)
		if err != nil {
			return nil, err
		}
		conn = m.Subscribe(ctx)
	}
	if err := conn.Ping(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// attach installs an open connection and subscribes every wanted channel.
func (ps *pubsub) attach(conn *redis.PubSub, reconnect bool) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed {
		return false
	}
	ps.conn = conn
	batch := make([]string, 0, subscribeBatch)
	flush := func() {
		names := batch
		ps.sendLocked(func(ctx context.Context) error { return conn.Subscribe(ctx, names...) })
		batch = make([]string, 0, subscribeBatch)
	}
	for name, ch := range ps.chans {
		if !ch.wanted {
			delete(ps.chans, name)
			continue
		}
		ch.pending++
		ch.gapDue = reconnect
		batch = append(batch, name)
		if len(batch) == subscribeBatch {
			flush()
		}
	}
	if len(batch) > 0 {
		flush()
	}
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

// read dispatches what arrives on conn until it fails. When nothing has
// arrived for a health-check interval it sends a PING; a connection
// silent for three intervals is given up.
func (ps *pubsub) read(conn *redis.PubSub) {
	hc := ps.b.opts.healthCheck
	last := time.Now()
	for {
		msg, err := conn.ReceiveTimeout(context.Background(), hc)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && time.Since(last) < 3*hc {
				ctx, cancel := context.WithTimeout(context.Background(), sendTimeout)
				err = conn.Ping(ctx)
				cancel()
				if err == nil {
					continue
				}
			}
			return
		}
		last = time.Now()
		switch m := msg.(type) {
		case *redis.Message:
			ps.deliver(m.Channel, m.Payload)
		case *redis.Subscription:
			ps.confirm(m.Kind, m.Channel)
		}
	}
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
