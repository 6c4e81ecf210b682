// Package hub delivers pub/sub wake-ups to the waiters of one session (see
// package session).
//
// Each session's hub has an id of its own (a random process part, a dot,
// and a number), and each primitive's channel one server subscription per
// hub, however many local waiters it has: the hub subscribes base + "/" +
// its id, so that a wake-up meant for one waiter wakes only the hub it is
// in, not every process waiting on the primitive. A waiter's Address
// ("hubid/waiterid") is what the server stores; a script wakes the waiter
// with
//
//	PUBLISH <base>/<hubid> <waiterid>
//
// or, when the script handed the primitive to that waiter outright,
//
//	PUBLISH <base>/<hubid> "<waiterid> <grant>"
//
// where grant is whatever the primitive needs to know about what it got
// (see Waiter.Grant). A script run through a session leaves the wake-ups
// of that session's own waiters to its caller (see Deliver), sparing the
// round through pub/sub.
//
// The payload WakeAll, a gap, or the end of the subscription wakes every
// waiter on the channel in the hub, since any of them may have missed its
// wake-up.
package hub

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/codec"
	"github.com/dsyncgo/dsync/observe"
)

// WakeAll is the payload that wakes every waiter on a channel.
const WakeAll = "*"

// Linger is how long a channel stays subscribed after its last waiter
// left. A lock under steady contention keeps its subscription instead of
// paying a SUBSCRIBE and an UNSUBSCRIBE for every wait.
const Linger = time.Second

// subscribeTimeout bounds one attempt to subscribe a channel on the server.
const subscribeTimeout = 10 * time.Second

// WatchChannel is the channel base that a Watch keeps subscribed.
const WatchChannel = "dsync-watch"

// ErrRetired is returned by Join on a hub whose session retired: the
// caller asks its session again.
var ErrRetired = errors.New("hub: retired")

// Hub is the pub/sub fan-out of one session.
type Hub struct {
	id     string
	idArg  any // id, as a script argument
	b      backend.Backend
	onIdle func() // told, without any lock held, when the hub has no topic left

	mu       sync.Mutex
	topics   map[string]*topic
	closing  []backend.Subscription // retired under mu, closed after it
	removed  bool                   // a topic was retired under mu
	watchers map[*watcher]struct{}
	retired  bool
}

// watcher is a Watch registration.
type watcher struct{ fn func() }

type topic struct {
	name    string        // the primitive's channel base
	channel string        // the server channel: name/hub id
	ready   chan struct{} // closed when the subscription attempt ended
	err     error         // its outcome
	sub     backend.Subscription
	waiters map[string]*Waiter
	watched bool        // the watch channel, kept while there are watchers
	idle    *time.Timer // retires the topic when it has lingered long enough
	gone    bool        // removed from the hub
}

// unused reports whether nothing keeps t subscribed.
func (t *topic) unused() bool { return len(t.waiters) == 0 && !t.watched }

// Waiter is one waiter's registration on a channel.
type Waiter struct {
	h     *Hub
	t     *topic
	id    string
	c     chan struct{}
	grant string // guarded by h.mu: a hand-off not yet taken
}

// process is this process's part of every hub id; hubs counts the hubs
// made, for the rest.
var (
	process = dsync.NewID()[:12]
	hubs    atomic.Uint64
)

// New returns the hub of a session on b. onIdle, if set, is called
// without any lock held whenever the hub's last topic is retired.
func New(b backend.Backend, onIdle func()) *Hub {
	h := &Hub{
		id:     process + "." + strconv.FormatUint(hubs.Add(1), 36),
		b:      b,
		onIdle: onIdle,
		topics: make(map[string]*topic),
	}
	h.idArg = h.id
	return h
}

// IDArg returns ID as a script argument, made once.
func (h *Hub) IDArg() any { return h.idArg }

// IsID reports whether s is the id of a hub of this process.
func IsID(s string) bool {
	return len(s) > len(process)+1 && s[:len(process)] == process && s[len(process)] == '.' && !strings.ContainsRune(s, '/')
}

// ID returns the hub's id, the first part of its waiters' addresses. A
// script told it leaves the wake-ups of the hub's waiters to its caller.
func (h *Hub) ID() string { return h.id }

// Join registers waiter id on channel and returns once the channel is
// subscribed on the server, so that no wake-up published afterwards is
// missed. The caller must Leave. It returns ErrRetired if the hub's
// session retired.
func (h *Hub) Join(ctx context.Context, channel, id string) (*Waiter, error) {
	w := &Waiter{id: id, c: make(chan struct{}, 1)}
	h.mu.Lock()
	if h.retired {
		h.mu.Unlock()
		return nil, ErrRetired
	}
	t := h.topics[channel]
	if t == nil {
		t = h.newTopicLocked(channel)
	}
	h.addLocked(t, w)
	h.mu.Unlock()
	select {
	case <-w.t.ready:
		if w.t.err != nil {
			w.Leave()
			return nil, w.t.err
		}
		return w, nil
	case <-ctx.Done():
		w.Leave()
		return nil, ctx.Err()
	}
}

func (h *Hub) newTopicLocked(channel string) *topic {
	t := &topic{name: channel, channel: channel + "/" + h.id, ready: make(chan struct{}), waiters: make(map[string]*Waiter)}
	h.topics[channel] = t
	go h.serve(t)
	return t
}

// Joined registers waiter id on channel if the channel is already
// subscribed, without any I/O, and returns nil otherwise.
func (h *Hub) Joined(channel, id string) *Waiter {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.topics[channel]
	if t == nil || t.sub == nil || h.retired {
		return nil
	}
	w := &Waiter{id: id, c: make(chan struct{}, 1)}
	h.addLocked(t, w)
	return w
}

// Subscribed reports whether channel is subscribed, without any I/O.
func (h *Hub) Subscribed(channel string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.topics[channel]
	return t != nil && t.sub != nil
}

// Watch calls fn whenever the hub's pub/sub connection may have been
// broken and established again: a gap, or a subscription of the hub that
// failed and was made again, on any channel. Messages may have been lost
// then, and the server may have restarted. So that there is a connection
// to notice, Watch keeps WatchChannel subscribed, asynchronously, until
// stop is called; on a sharded backend that connection reaches one shard,
// and the channels of the hub's waiters the shards they hash to. fn is
// called without any lock held, in a goroutine of its own, and must not
// block for long; it may be called more than once for one reconnection.
func (h *Hub) Watch(fn func()) (stop func()) {
	w := &watcher{fn: fn}
	h.mu.Lock()
	if h.watchers == nil {
		h.watchers = make(map[*watcher]struct{})
	}
	h.watchers[w] = struct{}{}
	t := h.topics[WatchChannel]
	if t == nil {
		t = h.newTopicLocked(WatchChannel)
	}
	t.watched = true
	if t.idle != nil {
		t.idle.Stop()
		t.idle = nil
	}
	h.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			delete(h.watchers, w)
			if t := h.topics[WatchChannel]; t != nil && len(h.watchers) == 0 {
				t.watched = false
				if t.unused() {
					h.lingerLocked(t)
				}
			}
			h.unlock()
		})
	}
}

// notifyLocked calls the watchers, each in a goroutine of its own.
func (h *Hub) notifyLocked() {
	for w := range h.watchers {
		go w.fn()
	}
}

func (h *Hub) addLocked(t *topic, w *Waiter) {
	w.h, w.t = h, t
	t.waiters[w.id] = w
	if t.idle != nil {
		t.idle.Stop()
		t.idle = nil
	}
}

// Address returns what a script needs to wake this waiter: "hubid/id".
func (w *Waiter) Address() string { return w.h.id + "/" + w.id }

// C returns the channel on which the waiter is woken. A wake-up is kept
// until received, so none is lost between the waiter's attempts.
func (w *Waiter) C() <-chan struct{} { return w.c }

// Grant returns, and forgets, what the last hand-off to this waiter
// carried, or "" if none was received since the last call. A hand-off
// wakes the waiter like any wake-up; the grant is kept until taken, so a
// plain wake-up arriving after it does not hide it.
func (w *Waiter) Grant() string {
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	g := w.grant
	w.grant = ""
	return g
}

// Leave unregisters the waiter. The channel is unsubscribed when its last
// waiter leaves, after Linger. Leave is idempotent.
func (w *Waiter) Leave() {
	h := w.h
	h.mu.Lock()
	if w.t.waiters[w.id] == w {
		delete(w.t.waiters, w.id)
		if w.t.unused() {
			h.lingerLocked(w.t)
		}
	}
	h.unlock()
}

// lingerLocked keeps an unused topic subscribed for Linger, then retires
// it unless a waiter joined meanwhile.
func (h *Hub) lingerLocked(t *topic) {
	if t.sub == nil || t.gone {
		h.removeLocked(t) // not subscribed (yet): nothing worth keeping
		return
	}
	var idle *time.Timer
	idle = time.AfterFunc(Linger, func() {
		h.mu.Lock()
		if t.idle == idle {
			t.idle = nil
			h.removeLocked(t)
		}
		h.unlock()
	})
	t.idle = idle
}

// removeLocked retires t. Its subscription, if established, is closed
// (which ends serve) once h.mu is released, because closing may write to
// the network; if still being established, serve closes it.
func (h *Hub) removeLocked(t *topic) {
	if t.gone {
		return
	}
	t.gone = true
	h.removed = true
	if h.topics[t.name] == t {
		delete(h.topics, t.name)
	}
	if t.sub != nil {
		h.closing = append(h.closing, t.sub)
	}
}

// unlock releases h.mu, closes the subscriptions retired meanwhile, and
// tells the session when no topic is left.
func (h *Hub) unlock() {
	closing := h.closing
	h.closing = nil
	idle := h.removed && len(h.topics) == 0
	h.removed = false
	h.mu.Unlock()
	for _, sub := range closing {
		sub.Close()
	}
	if idle && h.onIdle != nil {
		h.onIdle()
	}
}

// Retire marks the hub retired if it has no topic, so that Join fails
// with ErrRetired, and reports whether it did.
func (h *Hub) Retire() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.topics) > 0 {
		return false
	}
	h.retired = true
	return true
}

// serve subscribes t's channel and dispatches its messages until the
// subscription ends.
func (h *Hub) serve(t *topic) {
	ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
	sub, err := h.b.Subscribe(ctx, t.channel)
	cancel()
	if err != nil && ctx.Err() != nil {
		// The hub's own deadline, not any caller's: a failure to retry.
		err = fmt.Errorf("hub: subscribing %q took over %v: %v", t.channel, subscribeTimeout, err)
	}
	h.mu.Lock()
	if err != nil && t.watched && !errors.Is(err, dsync.ErrClosed) {
		// No waiter is told of the failure: the watch channel is wanted
		// until its watchers stop, however long the server is away.
		h.mu.Unlock()
		if sub = h.resubscribe(t); sub != nil {
			err = nil
		}
		h.mu.Lock()
	}
	t.err = err
	if err == nil {
		t.sub = sub
		if t.gone {
			h.closing = append(h.closing, sub)
		} else if t.unused() {
			h.lingerLocked(t)
		}
	} else {
		h.removeLocked(t)
	}
	close(t.ready)
	if err != nil {
		h.unlock()
		return
	}
	h.unlock()

	for {
		m, err := sub.Receive(context.Background())
		h.mu.Lock()
		switch {
		case err != nil && !t.gone && !errors.Is(err, dsync.ErrClosed):
			// The subscription failed, not closed by us or with its
			// backend: subscribe again, keeping the waiters on it, and
			// wake them, since they may have missed their wake-ups.
			t.sub = nil
			t.wakeAll()
			h.unlock()
			sub.Close()
			if sub = h.resubscribe(t); sub != nil {
				continue
			}
			h.mu.Lock()
			fallthrough
		case err != nil:
			// Closed by the last Leave, or the backend closed: wake
			// everyone still here so they notice.
			t.wakeAll()
			h.removeLocked(t)
			h.unlock()
			return
		case m.Gap || m.Payload == WakeAll:
			t.wakeAll()
			if m.Gap {
				h.notifyLocked()
				observe.For(h.b).ReportPubSub(observe.PubSubEvent{Channel: t.name})
			}
		default:
			id, grant := codec.Wake(m.Payload)
			if w := t.waiters[id]; w != nil {
				if grant != "" {
					w.grant = grant
				}
				w.wake()
			}
		}
		h.unlock()
	}
}

// resubscribe subscribes t's channel again after its subscription failed,
// with capped backoff, until it succeeds, the topic is retired, or the
// backend is closed. On success the waiters are woken once more, as for a
// gap; otherwise it returns nil.
func (h *Hub) resubscribe(t *topic) backend.Subscription {
	for n := 0; ; n++ {
		if n > 0 {
			time.Sleep(min(10*time.Millisecond<<min(n-1, 7), time.Second))
		}
		h.mu.Lock()
		gone := t.gone
		h.mu.Unlock()
		if gone {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
		sub, err := h.b.Subscribe(ctx, t.channel)
		cancel()
		if errors.Is(err, dsync.ErrClosed) {
			return nil
		}
		if err != nil {
			continue
		}
		h.mu.Lock()
		if t.gone {
			h.closing = append(h.closing, sub)
			h.unlock()
			return nil
		}
		t.sub = sub
		t.wakeAll()
		h.notifyLocked()
		observe.For(h.b).ReportPubSub(observe.PubSubEvent{Channel: t.name, Reconnect: true})
		h.unlock()
		return sub
	}
}

// Deliver wakes the waiter with the given id on channel with grant, as the
// message "<waiterid> <grant>" on the hub's channel would (an empty grant:
// a wake-up without one), and reports whether that waiter is here. A
// waiter not found has left, and its clean-up deals with what it was
// handed.
func (h *Hub) Deliver(channel, id, grant string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.topics[channel]
	if t == nil {
		return false
	}
	w := t.waiters[id]
	if w == nil {
		return false
	}
	if grant != "" {
		w.grant = grant
	}
	w.wake()
	return true
}

// Local returns the waiter id of address if the waiter is one of this
// hub's, and false otherwise.
func (h *Hub) Local(address string) (string, bool) {
	if len(address) > len(h.id) && address[len(h.id)] == '/' && address[:len(h.id)] == h.id {
		return address[len(h.id)+1:], true
	}
	return "", false
}

// WakeAll wakes every waiter of the hub on channel, as the payload
// WakeAll does: for a caller that may have missed what a script handed to
// whom (its reply was lost), so that the waiters try again.
func (h *Hub) WakeAll(channel string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t := h.topics[channel]; t != nil {
		t.wakeAll()
	}
}

func (t *topic) wakeAll() {
	for _, w := range t.waiters {
		w.wake()
	}
}

func (w *Waiter) wake() {
	select {
	case w.c <- struct{}{}:
	default:
	}
}

// Topics reports how many channels the hub has subscribed, for tests and
// benchmarks.
func (h *Hub) Topics() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.topics)
}
