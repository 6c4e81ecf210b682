// Package observe is how dsync reports what its primitives do, for
// metrics and traces: a set of hooks, any of which may be nil, that the
// lock core calls as acquisitions start and end, holds end (released or
// lost), the watchdog renews leases, releases hand a lock on, waiters come
// and go, and pub/sub connections break. Package otel (module
// github.com/dsyncgo/dsync/otel) implements it with OpenTelemetry metrics
// and spans; this package imports nothing of it.
//
// Hooks are set per backend, with Set, for every primitive on it and for
// the backend's renewals and connections, or per handle with the
// WithObserver option of each primitive's package, which takes precedence
// for that handle's acquisitions, holds and waiters. An unset observer
// costs a nil check.
//
// Hooks run synchronously on the goroutine doing the work (a caller's, or
// the lease scheduler's): they must be fast, must not block, and must not
// call back into dsync. A hook that panics is recovered and disabled; the
// panic is reported once through slog.Default.
package observe

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// An Observer is a set of hooks. A nil Observer, and a nil hook, report
// nothing.
type Observer struct {
	// Acquire is called when an acquisition (LockContext, TryLockContext,
	// and their read and permit forms) begins, before any I/O. The
	// function it returns, if not nil, is called once when the
	// acquisition ends. The context it returns, if not nil, is passed to
	// that function's caller's I/O (a span's context, say); it must be
	// derived from ctx.
	Acquire func(ctx context.Context, a Acquisition) (context.Context, func(AcquireResult))

	// HoldEnded is called when a hold ends: released by its last unlock,
	// or lost.
	HoldEnded func(HoldEnd)

	// Renewed is called after each batched renewal call of a backend's
	// lease scheduler.
	Renewed func(Renewal)

	// HandedOff is called for each waiter a release handed a lock to.
	HandedOff func(HandOff)

	// Waiting is called with +1 when an acquisition of this process
	// starts waiting (its first attempt failed) and with -1 when it
	// stops, so that the sum is the number of waiters.
	Waiting func(Waiters)

	// PubSub is called when a subscription of the backend's hub was
	// broken and made again, or reported a gap: wake-ups may have been
	// lost, and every waiter on the channel tries again.
	PubSub func(PubSubEvent)
}

// Acquisition describes an acquisition that begins.
type Acquisition struct {
	Primitive string // "mutex", "fairlock", "rwlock", "semaphore", "election"
	Name      string // the lock's name
	Role      string // "x" exclusive, "r" read, "p" permits
	Try       bool   // one attempt, without waiting
}

// Outcome is how an acquisition ended.
type Outcome string

const (
	Acquired  Outcome = "acquired"
	Busy      Outcome = "busy"      // a try that found the lock held
	TimedOut  Outcome = "timeout"   // ctx's deadline passed
	Cancelled Outcome = "cancelled" // ctx was cancelled
	Failed    Outcome = "error"     // a backend error that could not pass
)

// AcquireResult is how an acquisition ended.
type AcquireResult struct {
	Outcome Outcome
	Wait    time.Duration // from its start to its end
	Err     error         // for TimedOut, Cancelled and Failed
}

// HoldEnd describes a hold that ended.
type HoldEnd struct {
	Primitive, Name, Role string
	Held                  time.Duration // since it was acquired
	Lost                  bool          // lost, not released
	Reason                string        // why it was lost: "lease expired", "hold no longer on the server", ...
}

// Renewal describes one batched renewal call.
type Renewal struct {
	Leases int           // leases in the call
	Failed bool          // the call failed (its leases are retried)
	Gone   int           // leases the call found gone (lost)
	Took   time.Duration // the call's round trip
}

// HandOff describes a lock handed to a waiter by a release.
type HandOff struct {
	Channel string // the primitive's wake-up channel base
	Local   bool   // the waiter is in this process, woken directly
}

// Waiters describes a change in the waiters of this process.
type Waiters struct {
	Primitive, Name string
	Delta           int // +1 or -1
}

// PubSubEvent describes a pub/sub subscription made again, or a gap.
type PubSubEvent struct {
	Channel string
	// Reconnect: the subscription failed and the core made it again.
	// Otherwise a gap: the adapter made its connection again itself (as
	// the redigo and go-redis adapters do), or a slow receiver's mailbox
	// dropped messages.
	Reconnect bool
}

// backends maps backends to their observers: copied on write, so that
// the lookup on every acquisition takes no lock.
var (
	backends   atomic.Pointer[map[any]*Observer]
	backendsMu sync.Mutex
)

// Set makes o the observer of backend b (a backend.Backend) and of every
// primitive on it without one of its own; nil removes it. The observer is
// looked up at each acquisition, renewal and pub/sub event, so a change
// applies from then on; a hold keeps reporting its end to the observer it
// was acquired under. Set(b, nil) when b is closed, or the registry keeps
// it.
func Set(b any, o *Observer) {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	m := map[any]*Observer{}
	if old := backends.Load(); old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	if o == nil {
		delete(m, b)
	} else {
		m[b] = o
	}
	if len(m) == 0 {
		backends.Store(nil)
		return
	}
	backends.Store(&m)
}

// For returns the observer of backend b, or nil.
func For(b any) *Observer {
	m := backends.Load()
	if m == nil {
		return nil
	}
	return (*m)[b]
}

// The calls below are what dsync calls; each is safe on a nil Observer.

// StartAcquire calls o.Acquire and returns the context to use and the end
// function (never nil).
func (o *Observer) StartAcquire(ctx context.Context, a Acquisition) (context.Context, func(AcquireResult)) {
	if o == nil || o.Acquire == nil {
		return ctx, nop
	}
	var (
		c    context.Context
		done func(AcquireResult)
	)
	o.guard("Acquire", func() { c, done = o.Acquire(ctx, a) })
	if c == nil {
		c = ctx
	}
	if done == nil {
		return c, nop
	}
	return c, func(r AcquireResult) { o.guard("Acquire's end", func() { done(r) }) }
}

func nop(AcquireResult) {}

// ReportHoldEnded calls o.HoldEnded.
func (o *Observer) ReportHoldEnded(h HoldEnd) {
	if o != nil && o.HoldEnded != nil {
		o.guard("HoldEnded", func() { o.HoldEnded(h) })
	}
}

// ReportRenewed calls o.Renewed.
func (o *Observer) ReportRenewed(r Renewal) {
	if o != nil && o.Renewed != nil {
		o.guard("Renewed", func() { o.Renewed(r) })
	}
}

// ReportHandedOff calls o.HandedOff.
func (o *Observer) ReportHandedOff(h HandOff) {
	if o != nil && o.HandedOff != nil {
		o.guard("HandedOff", func() { o.HandedOff(h) })
	}
}

// ReportWaiting calls o.Waiting.
func (o *Observer) ReportWaiting(w Waiters) {
	if o != nil && o.Waiting != nil {
		o.guard("Waiting", func() { o.Waiting(w) })
	}
}

// ReportPubSub calls o.PubSub.
func (o *Observer) ReportPubSub(e PubSubEvent) {
	if o != nil && o.PubSub != nil {
		o.guard("PubSub", func() { o.PubSub(e) })
	}
}

var panicked sync.Map // *Observer -> struct{}: hooks disabled after a panic

// guard runs a hook, recovering a panic: the observer is disabled and the
// panic logged once, so that a faulty hook never takes down a caller or
// the lease scheduler.
func (o *Observer) guard(hook string, f func()) {
	if _, off := panicked.Load(o); off {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			if _, loaded := panicked.LoadOrStore(o, struct{}{}); !loaded {
				slog.Default().Error("dsync: an observer hook panicked; the observer is disabled", "hook", hook, "panic", fmt.Sprint(r))
			}
		}
	}()
	f()
}

// OutcomeOf returns the outcome of an acquisition that ended with err
// (and, for a try, acquired or not).
func OutcomeOf(ctx context.Context, acquired bool, err error) Outcome {
	switch {
	case err == nil && acquired:
		return Acquired
	case err == nil:
		return Busy
	case ctx.Err() == context.DeadlineExceeded:
		return TimedOut
	case ctx.Err() != nil:
		return Cancelled
	}
	return Failed
}
