package core

import (
	"context"
	"fmt"
	"sync"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/lease"
)

// Scope makes a hold of role a scope (see "Holds as contexts" in package
// dsync): it acquires with lock, for ctx's owner or, with none in ctx, a
// fresh one, and returns a context derived from ctx that carries that
// owner and is cancelled when the hold ends, with a function that ends it:
// it cancels the context, then releases with unlock, once.
//
// The context is cancelled with a cause that matches dsync.ErrNotHeld and
// says how when the hold is lost (see LostCause), and with
// context.Canceled when it is released. On failure lock's error is
// returned, with a nil context and function.
func (h *Handle) Scope(ctx context.Context, role string, lock, unlock func(context.Context) error) (context.Context, func() error, error) {
	oc := ctx
	if _, ok := dsync.OwnerFrom(ctx); !ok {
		oc = dsync.WithOwner(ctx)
	}
	if err := lock(oc); err != nil {
		return nil, nil, err
	}
	_, l := h.Current(oc, role)
	sctx, release := h.ScopeLease(oc, l, ErrLost, func() error { return unlock(context.WithoutCancel(oc)) })
	return sctx, release, nil
}

// ScopeLease returns a context derived from ctx that is cancelled when the
// lease l ends (at once if l is nil or has ended: the hold was lost before
// the scope began), and a release function that cancels it, then calls
// end, once; later calls return the first's result. A loss is told with
// LostCause(lost, reason). It starts no goroutine: the lease cancels the
// context in the step that closes its Done.
func (h *Handle) ScopeLease(ctx context.Context, l *lease.Lease, lost error, end func() error) (context.Context, func() error) {
	sctx, cancel := context.WithCancelCause(ctx)
	var stop *lease.EndHook
	if l == nil {
		cancel(h.LostCause(lost, ""))
	} else {
		stop = l.OnEnd(func(wasLost bool, reason string) {
			if wasLost {
				cancel(h.LostCause(lost, reason))
				return
			}
			cancel(nil)
		})
	}
	var once sync.Once
	var err error
	return sctx, func() error {
		once.Do(func() {
			stop.Stop()
			// The work in the scope is told before another owner can
			// take the hold.
			cancel(nil)
			err = end()
		})
		return err
	}
}

// LostCause returns the cause of a scope's context whose hold was lost
// for the given reason (see lease.Lease.Reason): an error that matches
// dsync.ErrNotHeld and lost (ErrLost, or a primitive's own) and says how,
// such as
//
//	mutex "jobs": the hold was lost (hold no longer on the server): dsync: not held by this owner
func (h *Handle) LostCause(lost error, reason string) error {
	if reason == "" {
		return fmt.Errorf("%s %q: %w: %w", h.Kind, truncate(h.Name), lost, dsync.ErrNotHeld)
	}
	return fmt.Errorf("%s %q: %w (%s): %w", h.Kind, truncate(h.Name), lost, reason, dsync.ErrNotHeld)
}
