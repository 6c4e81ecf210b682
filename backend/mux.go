package backend

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// MuxOptions configures a Mux. Zero fields take their defaults.
type MuxOptions struct {
	// HealthCheck is how often an idle connection is pinged. A connection
	// that shows nothing for three intervals is considered lost and
	// replaced. The default is 5s.
	HealthCheck time.Duration
	// MailboxSize is how many undelivered messages a subscription queues
	// before they are replaced by a gap (see Mailbox). The default is
	// DefaultMailboxSize.
	MailboxSize int
	// MaxBackoff caps the delay between attempts to dial a lost
	// connection again. The first attempt after the loss of a connection
	// that lived a second or more is immediate, after one lost sooner
	// 10-20ms if it confirmed a subscription or delivered a message. A
	// connection lost sooner before that (a PING's reply does not count)
	// counts as a failed dial: the delay doubles with each, up to the
	// cap. The default cap is 500ms.
	MaxBackoff time.Duration
}

const (
	// subscribeBatch bounds the channels named in one SUBSCRIBE when a
	// connection is re-established.
	subscribeBatch = 500

	// sendTimeout bounds one dial, or one command written, and so how
	// long Close can wait for one in flight.
	sendTimeout = 2 * time.Second
)

// Mux is the pub/sub half of a backend, written once for every adapter:
// it multiplexes any number of subscriptions over one connection (one per
// master on a cluster) that a PubSubDriver opens, and keeps the rules of
// the package documentation that concern pub/sub (3 to 6, and 8 for its
// part). An adapter's Subscribe calls the Mux's, and its Close calls the
// Mux's.
//
// What the Mux does:
//
//   - Each channel is subscribed on the server once, reference-counted
//     across its Subscriptions, and unsubscribed when the last one closes.
//     A channel stays in the table until the server confirms its
//     UNSUBSCRIBE, so that a prompt re-subscription is counted right.
//   - Subscribe returns once the server confirmed the channel. The
//     confirmations of a channel are counted on the current connection:
//     each SUBSCRIBE sent adds one pending, each confirmation removes
//     one; replies come in the order commands were sent, so when none is
//     pending while the channel is wanted, the last SUBSCRIBE is applied.
//   - The connection is opened by the first Subscribe and then lingers:
//     it stays open, pinged every HealthCheck, while no channel is
//     subscribed, so that the next Subscribe needs no dial.
//   - A connection that fails, or shows nothing for three health-check
//     intervals, is closed and dialed again: at once if it served a
//     second or more, else with capped, jittered backoff (see
//     MuxOptions.MaxBackoff); every wanted channel is subscribed again in
//     batches, and each live subscription receives a gap once its channel
//     is back. A connection that Close ends is not dialed again.
//   - Messages go into each subscription's Mailbox, so a slow receiver
//     never stalls the reader or another subscription.
//   - With a driver that implements SlotMaster, channels are placed on
//     their slot's master, one connection per master.
//
// The Mux starts one goroutine per connection, on its first Subscribe,
// and Close waits for them. A Mux is safe for concurrent use.
type Mux struct {
	driver PubSubDriver
	slots  SlotMaster // nil unless the driver is for a cluster
	opts   MuxOptions

	mu     sync.Mutex
	closed bool
	shards map[string]*shard // by master address; "" off a cluster
}

// NewMux returns a Mux that opens its connections through d.
func NewMux(d PubSubDriver, opts MuxOptions) *Mux {
	if opts.HealthCheck <= 0 {
		opts.HealthCheck = 5 * time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 500 * time.Millisecond
	}
	m := &Mux{driver: d, opts: opts, shards: make(map[string]*shard)}
	m.slots, _ = d.(SlotMaster)
	return m
}

// Subscribe subscribes to the channel name and returns once the server confirmed
// it. It fails with ctx's error when ctx ends first (while the Mux cannot
// dial its connection, an error that wraps ctx's and names the last
// dial's), and with ErrClosed after Close.
func (m *Mux) Subscribe(ctx context.Context, name string) (Subscription, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	addr, route := "", ""
	if m.slots != nil {
		var err error
		if addr, err = m.slots.MasterAddr(ctx, name); err != nil {
			return nil, err
		}
		route = name
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	sh := m.shards[addr]
	if sh == nil {
		sh = &shard{
			mux:     m,
			route:   route,
			chans:   make(map[string]*channel),
			closing: make(chan struct{}),
			done:    make(chan struct{}),
		}
		m.shards[addr] = sh
	}
	m.mu.Unlock()
	return sh.subscribe(ctx, name)
}

// Close closes every connection, ends every subscription (their Receive
// returns ErrClosed) and waits for the Mux's goroutines to exit. It is
// idempotent; afterwards Subscribe returns ErrClosed.
func (m *Mux) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	shards := m.shards
	m.shards = nil
	m.mu.Unlock()
	for _, sh := range shards {
		sh.close()
	}
	return nil
}

// shard is one connection of a Mux and the channels it carries.
type shard struct {
	mux *Mux
	// route, on a cluster, is a channel whose hash slot's master the
	// connection goes to, found anew at each dial; "" elsewhere.
	route string

	mu      sync.Mutex
	conn    PubSubConn // nil while disconnected
	chans   map[string]*channel
	started bool
	closed  bool
	dialErr error         // the last dial's error, until a dial succeeds
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

type subscription struct {
	sh   *shard
	name string
	box  *Mailbox
	once sync.Once
}

func (s *subscription) Receive(ctx context.Context) (Message, error) {
	return s.box.Receive(ctx)
}

func (s *subscription) Close() error {
	s.once.Do(func() {
		s.sh.remove(s)
		s.box.Close()
	})
	return nil
}

func (sh *shard) subscribe(ctx context.Context, name string) (Subscription, error) {
	sub := &subscription{sh: sh, name: name, box: NewMailbox(sh.mux.opts.MailboxSize)}

	sh.mu.Lock()
	if sh.closed {
		sh.mu.Unlock()
		return nil, ErrClosed
	}
	if !sh.started {
		sh.started = true
		go sh.run()
	}
	ch := sh.chans[name]
	if ch == nil {
		ch = &channel{subs: make(map[*subscription]struct{}), ready: make(chan struct{})}
		sh.chans[name] = ch
	}
	ch.subs[sub] = struct{}{}
	if !ch.wanted {
		ch.wanted = true
		if sh.conn != nil {
			ch.pending++
			sh.sendLocked(func(ctx context.Context, c PubSubConn) error { return c.Subscribe(ctx, name) })
		}
		// While disconnected, the next connection subscribes every
		// wanted channel.
	}
	ready := ch.ready
	sh.mu.Unlock()

	select {
	case <-ready:
		return sub, nil
	case <-ctx.Done():
		sub.Close()
		sh.mu.Lock()
		dialErr := sh.dialErr
		sh.mu.Unlock()
		if dialErr != nil {
			// Say why: the caller logs a deadline otherwise.
			return nil, fmt.Errorf("%w (the pub/sub connection: %v)", ctx.Err(), dialErr)
		}
		return nil, ctx.Err()
	case <-sh.closing:
		sub.Close()
		return nil, ErrClosed
	}
}

func (sh *shard) remove(sub *subscription) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	ch := sh.chans[sub.name]
	if ch == nil {
		return
	}
	delete(ch.subs, sub)
	if len(ch.subs) > 0 || !ch.wanted {
		return
	}
	ch.wanted = false
	ch.gapDue = false
	ch.unconfirm()
	if sh.conn != nil && !sh.closed {
		sh.sendLocked(func(ctx context.Context, c PubSubConn) error { return c.Unsubscribe(ctx, sub.name) })
		return // forgotten when the server confirms
	}
	if ch.pending == 0 {
		delete(sh.chans, sub.name)
	}
}

// unconfirm makes the next Subscribe of the channel wait for a new
// confirmation.
func (ch *channel) unconfirm() {
	if ch.confirmed {
		ch.confirmed = false
		ch.ready = make(chan struct{})
	}
}

// sendLocked writes one command on the current connection; holding sh.mu
// keeps the commands of one channel in order. A failed write closes the
// connection so that the reader notices and dials again; the next
// connection subscribes from sh.chans, which is already up to date.
func (sh *shard) sendLocked(send func(ctx context.Context, c PubSubConn) error) {
	ctx, cancel := context.WithTimeout(context.Background(), sendTimeout)
	defer cancel()
	if err := send(ctx, sh.conn); err != nil {
		sh.conn.Close()
	}
}

func (sh *shard) close() {
	sh.mu.Lock()
	if sh.closed {
		sh.mu.Unlock()
		return
	}
	sh.closed = true
	close(sh.closing)
	if sh.conn != nil {
		sh.conn.Close()
	}
	if sh.ping != nil {
		sh.ping.Stop()
	}
	for _, ch := range sh.chans {
		for sub := range ch.subs {
			sub.box.Close()
		}
	}
	started := sh.started
	sh.mu.Unlock()
	if started {
		<-sh.done
	}
}

// run owns the connection: it dials, subscribes, reads until the
// connection fails, and starts over until the Mux is closed.
func (sh *shard) run() {
	defer close(sh.done)
	reconnect := false
	for attempt := 0; ; attempt++ {
		if attempt > 0 && !sh.sleep(sh.backoff(attempt)) {
			return
		}
		select {
		case <-sh.closing:
			// Close ended the connection: no dial, not even the
			// immediate one after a connection that served.
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), sendTimeout)
		conn, err := sh.mux.driver.DialPubSub(ctx, sh.route)
		cancel()
		sh.mu.Lock()
		sh.dialErr = err
		sh.mu.Unlock()
		if err != nil {
			continue
		}
		if !sh.attach(conn, reconnect) {
			conn.Close()
			return
		}
		reconnect = true
		attached := time.Now()
		answered := sh.read(conn)
		sh.detach()
		switch {
		case time.Since(attached) >= servedFor:
			// It served: the next dial is at once.
			attempt = -1
		case answered:
			// Lost soon after its dial: the first backoff, whatever
			// came before, so that pub/sub is back as soon after each
			// of many losses.
			attempt = 0
		}
		// Lost before it confirmed or delivered anything (a server that
		// drops what it accepts, a refused SUBSCRIBE, even after the
		// PONG of a driver's dial): a failed dial, which backs off
		// further.
	}
}

// servedFor is how long a connection must have lived for its loss to be
// dialled again at once (see MuxOptions.MaxBackoff).
const servedFor = time.Second

func (sh *shard) backoff(attempt int) time.Duration {
	d := 10 * time.Millisecond << min(attempt, 10)
	d = min(d, sh.mux.opts.MaxBackoff)
	return d/2 + rand.N(d/2+1)
}

func (sh *shard) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-sh.closing:
		return false
	}
}

// attach installs a fresh connection and subscribes every wanted channel,
// in batches.
func (sh *shard) attach(conn PubSubConn, reconnect bool) bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.closed {
		return false
	}
	sh.conn = conn
	batch := make([]string, 0, subscribeBatch)
	flush := func() {
		names := batch
		sh.sendLocked(func(ctx context.Context, c PubSubConn) error { return c.Subscribe(ctx, names...) })
		batch = make([]string, 0, subscribeBatch)
	}
	for name, ch := range sh.chans {
		if !ch.wanted {
			delete(sh.chans, name)
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
	sh.schedulePingLocked()
	return true
}

// detach forgets a failed connection: nothing is confirmed any more.
func (sh *shard) detach() {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.conn.Close()
	sh.conn = nil
	for name, ch := range sh.chans {
		ch.pending = 0
		if !ch.wanted {
			delete(sh.chans, name)
			continue
		}
		ch.unconfirm()
	}
}

func (sh *shard) schedulePingLocked() {
	if sh.ping != nil {
		sh.ping.Stop()
	}
	sh.ping = time.AfterFunc(sh.mux.opts.HealthCheck, sh.sendPing)
}

func (sh *shard) sendPing() {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.closed || sh.conn == nil {
		return
	}
	sh.sendLocked(func(ctx context.Context, c PubSubConn) error { return c.Ping(ctx) })
	sh.ping.Reset(sh.mux.opts.HealthCheck)
}

// read dispatches what arrives on conn until it fails or stays silent for
// three health-check intervals (the pings make it speak), and reports
// whether the server answered a subscription on it: a confirmation or a
// message. A PING's reply is no such answer: a driver that dials lazily
// sends one at dial (see PubSubDriver), which a server that then refuses
// SUBSCRIBE answers too.
func (sh *shard) read(conn PubSubConn) (answered bool) {
	silence := 3 * sh.mux.opts.HealthCheck
	for {
		ctx, cancel := context.WithTimeout(context.Background(), silence)
		ev, err := conn.Receive(ctx)
		cancel()
		if err != nil {
			// Close before detach takes sh.mu: a writer blocked on
			// this connection while holding sh.mu fails at once.
			conn.Close()
			return answered
		}
		answered = answered || ev.Kind != PubSubOther
		switch ev.Kind {
		case PubSubMessage:
			sh.deliver(ev.Channel, ev.Payload)
		case PubSubSubscribed:
			sh.confirmSubscribe(ev.Channel)
		case PubSubUnsubscribed:
			sh.confirmUnsubscribe(ev.Channel)
		}
	}
}

func (sh *shard) deliver(name, payload string) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	ch := sh.chans[name]
	if ch == nil {
		return
	}
	for sub := range ch.subs {
		sub.box.Put(Message{Channel: name, Payload: payload})
	}
}

func (sh *shard) confirmSubscribe(name string) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	ch := sh.chans[name]
	if ch == nil {
		return
	}
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
			sub.box.Put(Message{Channel: name, Gap: true})
		}
	}
}

func (sh *shard) confirmUnsubscribe(name string) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if ch := sh.chans[name]; ch != nil && !ch.wanted && ch.pending == 0 {
		delete(sh.chans, name)
	}
}
