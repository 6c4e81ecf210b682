// Package hub delivers pub/sub wake-ups to the waiters of one process.
//
// Each backend gets one hub, with an id of its own (the process's id, a
// dot, and a number; see Process and Deliver), and each primitive's
// channel one server subscription per hub, however many local waiters it
// has: the hub subscribes base + "/" + its id, so that a wake-up meant for
// one waiter wakes only the process it is in, not every process waiting on
// the primitive. A waiter's Address ("hubid/waiterid") is what the server
// stores; a script wakes the waiter with
//
//	PUBLISH <base>/<hubid> <waiterid>
//
// or, when the script handed the primitive to that waiter outright,
//
//	PUBLISH <base>/<hubid> "<waiterid> <grant>"
//
// where grant is whatever the primitive needs to know about what it got
// (see Waiter.Grant).
//
// The payload WakeAll, a gap, or the end of the subscription wakes every
// waiter on the channel in this process, since any of them may have missed
// its wake-up.
package hub

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/registry"
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

type hub struct {
	id      string
	b       backend.Backend
	mu      sync.Mutex
	topics  map[string]*topic
	closing []backend.Subscription // retired under mu, closed after it

	watchers map[*watcher]struct{}
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
	h     *hub
	t     *topic
	id    string
	c     chan struct{}
	grant string // guarded by h.mu: a hand-off not yet taken
}

var hubs registry.Registry[*hub]

// local indexes the hubs of this process by id, for Deliver.
var local struct {
	mu sync.Mutex
	m  map[string]*hub
	n  uint64 // hubs created
}

// process is this process's part of every hub id.
var process = dsync.NewID()[:12]

// Process returns the id that every hub of this process has as prefix,
// followed by a dot. A script handing a primitive to a waiter whose
// address starts with the caller's Process may leave the wake-up to the
// caller (see Deliver), sparing the round through pub/sub.
func Process() string { return process }

// Join registers waiter id on channel and returns once the channel is
// subscribed on the server, so that no wake-up published afterwards is
// missed. The caller must Leave.
func Join(ctx context.Context, b backend.Backend, channel, id string) (*Waiter, error) {
	w := &Waiter{id: id, c: make(chan struct{}, 1)}
	hubs.Do(b, newHub(b), func(h *hub) bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		t := h.topics[channel]
		if t == nil {
			t = &topic{name: channel, channel: channel + "/" + h.id, ready: make(chan struct{}), waiters: make(map[string]*Waiter)}
			h.topics[channel] = t
			go h.serve(t)
		}
		h.addLocked(t, w)
		return false
	})
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

// newHub returns the constructor of b's hub.
func newHub(b backend.Backend) func() *hub {
	return func() *hub {
		local.mu.Lock()
		defer local.mu.Unlock()
		local.n++
		h := &hub{id: process + "." + strconv.FormatUint(local.n, 36), b: b, topics: make(map[string]*topic)}
		if local.m == nil {
			local.m = make(map[string]*hub)
		}
		local.m[h.id] = h
		return h
	}
}

// WatchChannel is the channel base that a Watch keeps subscribed.
const WatchChannel = "dsync-watch"

// Watch calls fn whenever b's pub/sub connection may have been broken
// and established again: a gap, or a subscription of b's hub that failed
// and was made again, on any channel. Messages may have been lost then,
// and the server may have restarted. So that there is a connection to
// notice, Watch keeps WatchChannel subscribed, asynchronously, until stop
// is called; on a sharded backend that connection reaches one shard, and
// the channels of the hub's waiters the shards they hash to. fn is called
// without any lock held, in a goroutine of its own, and must not block
// for long; it may be called more than once for one reconnection.
func Watch(b backend.Backend, fn func()) (stop func()) {
	w := &watcher{fn: fn}
	var h *hub
	hubs.Do(b, newHub(b), func(x *hub) bool {
		h = x
		x.mu.Lock()
		defer x.mu.Unlock()
		if x.watchers == nil {
			x.watchers = make(map[*watcher]struct{})
		}
		x.watchers[w] = struct{}{}
		t := x.topics[WatchChannel]
		if t == nil {
			t = &topic{name: WatchChannel, channel: WatchChannel + "/" + x.id, ready: make(chan struct{}), waiters: make(map[string]*Waiter)}
			x.topics[WatchChannel] = t
			go x.serve(t)
		}
		t.watched = true
		if t.idle != nil {
			t.idle.Stop()
			t.idle = nil
		}
		return false
	})
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
			empty := len(h.topics) == 0
			h.unlock()
			if empty {
				h.forgetIfIdle()
			}
		})
	}
}

// notifyLocked calls the watchers, each in a goroutine of its own.
func (h *hub) notifyLocked() {
	for w := range h.watchers {
		go w.fn()
	}
}

// Joined registers waiter id on channel if the channel is already
// subscribed, without any I/O, and returns nil otherwise.
func Joined(b backend.Backend, channel, id string) *Waiter {
	var w *Waiter
	hubs.Do(b, nil, func(h *hub) bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		t := h.topics[channel]
		if t == nil || t.sub == nil {
			return false
		}
		w = &Waiter{id: id, c: make(chan struct{}, 1)}
		h.addLocked(t, w)
		return false
	})
	return w
}

func (h *hub) addLocked(t *topic, w *Waiter) {
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
// waiter leaves. Leave is idempotent.
func (w *Waiter) Leave() {
	h := w.h
	h.mu.Lock()
	if w.t.waiters[w.id] == w {
		delete(w.t.waiters, w.id)
		if w.t.unused() {
			h.lingerLocked(w.t)
		}
	}
	empty := len(h.topics) == 0
	h.unlock()
	if empty {
		h.forgetIfIdle()
	}
}

// lingerLocked keeps an unused topic subscribed for Linger, then retires
// it unless a waiter joined meanwhile.
func (h *hub) lingerLocked(t *topic) {
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
		empty := len(h.topics) == 0
		h.unlock()
		if empty {
			h.forgetIfIdle()
		}
	})
	t.idle = idle
}

// removeLocked retires t. Its subscription, if established, is closed
// (which ends serve) once h.mu is released, because closing may write to
// the network; if still being established, serve closes it.
func (h *hub) removeLocked(t *topic) {
	if t.gone {
		return
	}
	t.gone = true
	if h.topics[t.name] == t {
		delete(h.topics, t.name)
	}
	if t.sub != nil {
		h.closing = append(h.closing, t.sub)
	}
}

// unlock releases h.mu and closes the subscriptions retired meanwhile.
func (h *hub) unlock() {
	closing := h.closing
	h.closing = nil
	h.mu.Unlock()
	for _, sub := range closing {
		sub.Close()
	}
}

// serve subscribes t's channel and dispatches its messages until the
// subscription ends.
func (h *hub) serve(t *topic) {
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
	h.unlock()
	if err != nil {
		h.forgetIfIdle()
		return
	}

	for {
		m, err := sub.Receive(context.Background())
		h.mu.Lock()
		switch {
		case err != nil && !t.gone && !errors.Is(err, dsync.ErrClosed):
			// The subscription failed, not closed by us or with its
			// backend: subscribe again, keeping the waiters on it, and
			// wake them, since they may have missed their wake-ups.
			t.sub = nil
			for _, w := range t.waiters {
				w.wake()
			}
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
			for _, w := range t.waiters {
				w.wake()
			}
			h.removeLocked(t)
			h.unlock()
			h.forgetIfIdle()
			return
		case m.Gap || m.Payload == WakeAll:
			for _, w := range t.waiters {
				w.wake()
			}
			if m.Gap {
				h.notifyLocked()
				observe.For(h.b).ReportPubSub(observe.PubSubEvent{Channel: t.name})
			}
		default:
			id, grant, _ := strings.Cut(m.Payload, " ")
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
func (h *hub) resubscribe(t *topic) backend.Subscription {
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
		for _, w := range t.waiters {
			w.wake()
		}
		h.notifyLocked()
		observe.For(h.b).ReportPubSub(observe.PubSubEvent{Channel: t.name, Reconnect: true})
		h.unlock()
		return sub
	}
}

func (h *hub) forgetIfIdle() {
	hubs.Do(h.b, nil, func(cur *hub) bool {
		if cur != h {
			return false
		}
		h.mu.Lock()
		idle := len(h.topics) == 0
		h.mu.Unlock()
		if idle {
			local.mu.Lock()
			delete(local.m, h.id)
			local.mu.Unlock()
		}
		return idle
	})
}

// Deliver wakes the waiter at address on channel with grant, as the
// message "<waiterid> <grant>" on its hub's channel would (an empty grant:
// a wake-up without one, as the message "<waiterid>"), if that waiter is
// in this process, and reports whether it was. A script that hands a
// primitive to a waiter tells its caller, which wakes a waiter of its own
// process at once; the script publishes only to waiters of other
// processes (see Process). A waiter not found has left, and its clean-up
// deals with what it was handed.
func Deliver(channel, address, grant string) bool {
	hubID, id, ok := strings.Cut(address, "/")
	if !ok {
		return false
	}
	local.mu.Lock()
	h := local.m[hubID]
	local.mu.Unlock()
	if h == nil {
		return false
	}
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

// Backend returns the backend of the hub of this process that address
// (a waiter's address, "hubid/waiterid") belongs to, or nil if none does.
func Backend(address string) backend.Backend {
	hubID, _, _ := strings.Cut(address, "/")
	local.mu.Lock()
	defer local.mu.Unlock()
	if h := local.m[hubID]; h != nil {
		return h.b
	}
	return nil
}

// WakeLocal wakes every waiter on channel in this process, as WakeAll
// does on one hub: for a caller that may have missed what a script
// handed to whom (its reply was lost), so that the waiters try again.
func WakeLocal(channel string) {
	local.mu.Lock()
	hs := make([]*hub, 0, len(local.m))
	for _, h := range local.m {
		hs = append(hs, h)
	}
	local.mu.Unlock()
	for _, h := range hs {
		h.mu.Lock()
		if t := h.topics[channel]; t != nil {
			for _, w := range t.waiters {
				w.wake()
			}
		}
		h.mu.Unlock()
	}
}

func (w *Waiter) wake() {
	select {
	case w.c <- struct{}{}:
	default:
	}
}

// Topics reports how many channels b's hub has subscribed, for tests and
// benchmarks.
func Topics(b backend.Backend) int {
	n := 0
	hubs.Do(b, nil, func(h *hub) bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		n = len(h.topics)
		return false
	})
	return n
}
