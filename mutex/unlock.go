package mutex

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/hub"
	"github.com/dsyncgo/dsync/internal/lease"
	"github.com/dsyncgo/dsync/internal/wait"
)

// Unlock releases the ownerless hold taken through m by Lock (or by
// LockContext without an owner), from any goroutine, as sync.Mutex does.
//
// It panics if m has no such hold, as sync.Mutex does. A hold that was lost
// (its lease expired or it vanished from the server) is not a panic: the
// loss was reported through Done and is logged again here. Backend errors
// that may pass are retried until the lease would have expired anyway.
func (m *Mutex) Unlock() {
	if err := m.check(context.Background()); err != nil {
		panic("dsync/mutex: Unlock: " + err.Error())
	}
	if owner, _ := m.holder(context.Background()); owner == "" {
		panic(fmt.Sprintf("dsync/mutex: unlock of unlocked mutex %q", truncate(m.name)))
	}
	if err := m.UnlockContext(context.Background()); err != nil {
		m.cfg.Logger.Warn("dsync: unlock failed", "name", m.name, "error", err)
	}
}

// UnlockContext releases one hold of ctx's owner, or with no owner in ctx,
// the ownerless hold taken through m. The owner keeps the mutex until it has
// released as many holds as it took.
//
// It returns an error matching dsync.ErrNotHeld, without any I/O, when the
// owner holds nothing through this process: never locked, unlocked once too
// often, or locked by another owner, whose hold stays intact. It returns
// one too when the hold was lost. A failed release stops the watchdog, so
// the hold expires by itself within one lease.
func (m *Mutex) UnlockContext(ctx context.Context) error {
	if err := m.check(ctx); err != nil {
		return err
	}
	owner, _ := m.holder(ctx)
	var l *lease.Lease
	if owner != "" {
		l = lease.Get(m.b, m.key, owner)
	}
	// end forgets the hold here. An owner from ctx is never the handle's
	// ownerless hold, so clearing that is safe either way.
	end := func() {
		if l != nil {
			l.Release()
		}
		m.forget(owner)
		m.clearAnon(owner)
	}
	switch {
	case l == nil:
		end() // a lost ownerless hold, if that is what it was
		return m.wrap("unlock", dsync.ErrNotHeld)
	case l.Lost():
		end()
		return m.wrap("unlock", fmt.Errorf("%w: %w", dsync.ErrNotHeld, errLost))
	}
	l.SetReleasing(true)
	left, err := m.release(ctx, owner, l.Deadline())
	switch {
	case err != nil:
		end()
		return m.wrap("unlock", err)
	case left < 0:
		end()
		return m.wrap("unlock", fmt.Errorf("%w: %w: it is no longer on the server", dsync.ErrNotHeld, errLost))
	case left == 0:
		end()
	default:
		l.SetReleasing(false)
	}
	return nil
}

// release runs the release script, retrying errors that may pass until ctx
// is done or the hold's lease has run out. It returns the owner's
// remaining hold count, or -1 if the owner held nothing on the server. One
// operation id makes the retries safe: a release whose reply was lost is
// not applied twice.
func (m *Mutex) release(ctx context.Context, owner string, deadline time.Time) (left int64, err error) {
	op := dsync.NewID()
	h, queued := m.takeQueued(owner)
	args := make([]any, 0, 7+len(queued))
	args = append(args, owner, op, ms(m.cfg.Lease), m.channel, ms(FenceTTL), hub.Process(), ms(waiterTTL))
	for _, e := range queued {
		args = append(args, e)
	}
	defer func() { settle(h, err == nil && left > 0) }()
	ambiguous := false
	for failures := 1; ; failures++ {
		left, err = wait.HandOff(ctx, m.b, m.channel, releaseScript, m.handedFrom(h), []string{m.key, m.waiters, m.fence}, args...)
		if failures == 1 && len(queued) > 0 {
			// Only the first attempt carries the queued waiters: had a
			// retry registered them again, an entry its waiter removed
			// since (having found the mutex its own) would come back.
			// If this attempt failed, HandOff woke them, and they ask
			// the server themselves.
			registered(h)
			args = args[:7]
		}
		if err == nil {
			if left < 0 && ambiguous {
				left = 0 // an earlier attempt released the last hold
			}
			return left, nil
		}
		if !wait.Transient(err) || time.Now().After(deadline) {
			return 0, err
		}
		ambiguous = true
		if !wait.Sleep(ctx, wait.Backoff(failures)) {
			return 0, errors.Join(ctx.Err(), err)
		}
	}
}
