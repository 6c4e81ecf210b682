package mutex

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/hub"
	"github.com/dsyncgo/dsync/internal/lease"
	"github.com/dsyncgo/dsync/internal/wait"
)

// Lock locks m for a fresh ownerless hold, as sync.Mutex does: it is not
// reentrant, and Unlock on m, from any goroutine, releases it. Lock blocks
// until the mutex is acquired, riding out backend errors that may pass
// (connection failures, a restarting server) with capped backoff. It
// panics if the handle is invalid (see New) or its backend is closed.
func (m *Mutex) Lock() {
	if err := m.LockContext(context.Background()); err != nil {
		panic("dsync/mutex: Lock: " + err.Error())
	}
}

// LockContext locks m for ctx's owner (see dsync.WithOwner), re-entering if
// the owner already holds it, and waits while another owner holds it. With
// no owner in ctx, it takes an ownerless hold as Lock does.
//
// The wait ends when the mutex is acquired or ctx is done; ctx's deadline
// is the longest wait. Backend errors that may pass are retried until then.
// On failure nothing is left held or queued, and the error matches
// ctx.Err(), or is the backend error that cannot pass.
//
// An attempt on the server when ctx ends is still awaited, for at most
// half a second: the script runs whether or not its reply is read, and
// must not land after the clean-up. So LockContext can return that much
// after ctx ends, and reports success if that attempt acquired the mutex.
func (m *Mutex) LockContext(ctx context.Context) error {
	if err := m.check(ctx); err != nil {
		return err
	}
	owner, anon := lockOwner(ctx)
	op := dsync.NewID()
	var (
		got     grant
		address string     // the waiter's, once it joined the channel
		entry   string     // under which the waiter registered, if it did
		behind  *localHold // the hold here it is queued behind, if any
	)
	// leaveQueue takes the waiter out of the queue it is in, if any. If a
	// release already took its entry, it waits until that release has
	// registered it: only then may the waiter's own attempt or abandon
	// follow, or the registration would come after them.
	leaveQueue := func(ctx context.Context) {
		if behind == nil {
			return
		}
		if sent := unqueue(behind, entry); sent != nil {
			select {
			case <-sent:
			case <-ctx.Done():
				return // still behind: the abandon waits again
			}
		}
		behind = nil
	}
	initial := m.handedLease()
	err := wait.Acquire(ctx, wait.Spec{
		Backend:   m.b,
		Channel:   m.channel,
		WaiterID:  op, // a hand-off counts as the acquisition op
		Heartbeat: heartbeat,
		Try: func(ctx context.Context, a wait.Try) (bool, time.Duration, error) {
			if a.Address != "" && entry == "" {
				address = a.Address
				entry = address + "|" + strconv.FormatInt(ms(initial), 10) + "|" + owner
			}
			// Woken while queued behind a hold here, or a heartbeat later:
			// ask the server from now on.
			leaveQueue(ctx)
			if a.Prior == 0 && entry != "" {
				var lasts time.Duration
				if behind, lasts = m.queueBehind(owner, entry); behind != nil {
					return false, lasts, nil
				}
			}
			return m.try(ctx, owner, op, entry, a.Prior > 0, &got)
		},
		Granted: func(token string, since time.Time) bool {
			t, err := strconv.ParseInt(token, 10, 64)
			// Without time to spare, the next attempt confirms the
			// hold and restarts its lease.
			if err != nil || t < 1 || time.Since(since) >= initial/2 {
				return false
			}
			got = grant{count: 1, token: t, sent: since, initial: initial}
			return true
		},
		Abandon: func(ctx context.Context) error {
			leaveQueue(ctx)
			m.dropHanded(address)
			// A clean-up time of its own, whatever the wait took.
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait.AbandonTimeout)
			defer cancel()
			return m.abandon(actx, owner, op, entry)
		},
	})
	if err != nil {
		return m.wrap("lock", err)
	}
	m.hold(owner, anon, address, got)
	return nil
}

// TryLockContext makes one attempt to lock m for ctx's owner, without
// waiting for another holder to release. It reports whether the mutex is
// now held by the owner. When the attempt fails with an error, nothing is
// left held. As with LockContext, an attempt under way when ctx ends is
// awaited for at most half a second.
func (m *Mutex) TryLockContext(ctx context.Context) (bool, error) {
	if err := m.check(ctx); err != nil {
		return false, err
	}
	owner, anon := lockOwner(ctx)
	op := dsync.NewID()
	var got grant
	ok, _, err := m.try(ctx, owner, op, "", false, &got)
	if err != nil {
		// The attempt may have succeeded with its reply lost.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait.AbandonTimeout)
		m.abandon(actx, owner, op, "")
		cancel()
		return false, m.wrap("trylock", err)
	}
	if ok {
		m.hold(owner, anon, "", got)
	}
	return ok, nil
}

// grant is what a successful acquisition reports.
type grant struct {
	count   int64
	token   int64
	sent    time.Time     // the hold began after this
	initial time.Duration // its lease then, if shorter than the configured one
}

// handedLease returns the lease of a hold handed to a waiter by a release:
// the configured lease, or with the watchdog on, at most handoffLease, so
// that a waiter that died meanwhile holds the mutex up only briefly. The
// waiter's first renewal extends it to the configured lease.
func (m *Mutex) handedLease() time.Duration {
	if m.cfg.Watchdog {
		return min(m.cfg.Lease, handoffLease)
	}
	return m.cfg.Lease
}

// try makes one attempt for owner with operation id op. Unless entry is
// empty, a failure registers the waiter under it (see lua/handoff.lua);
// registered says an earlier attempt may have done so, and a success must
// remove the registration.
func (m *Mutex) try(ctx context.Context, owner, op, entry string, registered bool, got *grant) (bool, time.Duration, error) {
	sent := time.Now()
	// Should ctx end meanwhile, the attempt's result is still awaited
	// briefly: an acquisition or registration landing after the abandon
	// would hold the mutex, or be handed it, with nobody to take it.
	actx, release := wait.Detach(ctx)
	reply, err := m.b.Eval(actx, acquireScript, []string{m.key, m.waiters, m.fence},
		owner, op, ms(m.cfg.Lease), entry, ms(waiterTTL), flag(registered), ms(FenceTTL))
	release()
	if err != nil {
		return false, 0, err
	}
	r, err := backend.Ints(reply, 2)
	if err != nil {
		return false, 0, err
	}
	if r[0] == 0 {
		if r[1] < 0 {
			return false, -1, nil // no expiry: only a release will tell
		}
		return false, time.Duration(r[1]) * time.Millisecond, nil
	}
	if len(r) < 3 || r[1] < 1 || r[2] < 1 {
		return false, 0, fmt.Errorf("%w: acquire reply %v", dsync.ErrUnexpectedReply, reply)
	}
	*got = grant{count: r[1], token: r[2], sent: sent}
	return true, 0, nil
}

// hold records a successful acquisition, by the waiter at address if it
// waited: a first hold starts its lease, a re-entry extends it.
func (m *Mutex) hold(owner string, anon bool, address string, g grant) {
	var l *lease.Lease
	if g.count > 1 { // only a re-entry has a lease to extend
		l = lease.Get(m.b, m.key, owner)
	}
	if l != nil && !l.Lost() {
		l.Extend(g.sent)
	} else {
		spec := lease.Spec{
			Key:     m.key,
			Owner:   owner,
			Name:    m.name,
			TTL:     m.cfg.Lease,
			Token:   g.token,
			Initial: g.initial,
			Keys:    []string{m.key},
			Args:    []any{owner, ms(m.cfg.Lease)},
			Logger:  m.cfg.Logger,
		}
		if m.cfg.Watchdog {
			spec.Renew = renewScript
		}
		l = lease.Start(m.b, spec, g.sent)
	}
	m.holdLocal(owner, address, l)
	if anon {
		m.setAnon(owner)
	}
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func (m *Mutex) abandon(ctx context.Context, owner, op, entry string) error {
	_, err := wait.HandOff(ctx, m.b, m.channel, abandonScript, m.handedFrom(nil), []string{m.key, m.waiters, m.fence},
		owner, op, entry, m.channel, ms(FenceTTL), hub.Process())
	return err
}
