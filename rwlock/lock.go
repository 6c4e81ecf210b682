package rwlock

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/core"
)

// Lock locks m for writing for a fresh ownerless hold, as sync.RWMutex
// does: it is not reentrant, and Unlock on m, from any goroutine, releases
// it. It waits for every other hold to end, riding out backend errors that
// may pass with capped backoff and logging at Warn while the server cannot
// be reached. It panics if the handle is invalid (see New) or its backend
// is closed. Like sync.RWMutex's, a Lock by a goroutine that holds an
// ownerless read hold waits for that hold forever; use an owner (see
// LockContext) to be told ErrUpgrade instead.
func (m *RWMutex) Lock() {
	m.h.MustLock(&m.write)
}

// RLock locks m for reading for a fresh ownerless hold, as sync.RWMutex
// does; RUnlock on m, from any goroutine, releases it. It waits while a
// write hold is held, or, with writer preference, while a writer waits. It
// panics as Lock does.
func (m *RWMutex) RLock() {
	m.h.MustLock(&m.rd)
}

// LockContext locks m for writing for ctx's owner (see dsync.WithOwner),
// re-entering at once if the owner holds the write lock already, and
// otherwise waits until no other hold, read or write, is held; waiting
// writers are served in the order they reached the server. With no owner
// in ctx, it takes an ownerless hold as Lock does.
//
// An owner that holds only a read hold gets an error matching
// dsync.ErrUpgrade at once: two readers both waiting to upgrade would
// wait for each other forever. Release the read hold first, or take the
// write hold first and read under it. A writer that queued while its owner
// held none waits for a read hold the owner came to hold since (another
// of its goroutines, handed one as a reader that waited out a write) as
// for any other.
//
// The wait ends when the lock is acquired or ctx is done; ctx's deadline
// is the longest wait. On failure nothing is left held or queued, and the
// error matches ctx.Err(), or is the backend error that cannot pass.
func (m *RWMutex) LockContext(ctx context.Context) error {
	if err := m.upgrade(ctx, "lock"); err != nil {
		return err
	}
	return m.h.Lock(ctx, &m.write)
}

// RLockContext locks m for reading for ctx's owner, re-entering at once if
// the owner holds a read hold already. An owner that holds the write lock
// takes a read hold at once (a downgrade: it keeps reading after it
// releases the write hold). Otherwise it waits while another owner holds
// the write lock, or, with writer preference (the default), while a
// writer waits. With no owner in ctx, it takes an ownerless hold as RLock
// does. The wait and its failure are as with LockContext.
func (m *RWMutex) RLockContext(ctx context.Context) error {
	return m.h.Lock(ctx, &m.rd)
}

// TryLockContext makes one attempt to lock m for writing for ctx's owner,
// without waiting: it succeeds only if the owner holds the write lock
// already, or nothing is held and no live writer is queued. It reports
// whether the owner now holds the write lock. An owner with only a read
// hold gets dsync.ErrUpgrade, as from LockContext.
func (m *RWMutex) TryLockContext(ctx context.Context) (bool, error) {
	if err := m.upgrade(ctx, "trylock"); err != nil {
		return false, err
	}
	return m.h.TryLock(ctx, &m.write)
}

// TryRLockContext makes one attempt to lock m for reading for ctx's owner,
// without waiting, under the rules of RLockContext. It reports whether the
// owner now holds a read hold.
func (m *RWMutex) TryRLockContext(ctx context.Context) (bool, error) {
	return m.h.TryLock(ctx, &m.rd)
}

// errUpgrade is the server's refusal of an upgrade.
const errUpgrade = "DSYNC upgrade"

// upgrade reports, without I/O, an owner in ctx that holds a read hold of
// m on m's server, as far as this process knows (a lock of the same name
// on another server is another lock), and no write hold of that name
// anywhere. Whatever it cannot be sure of, the server decides: it refuses
// an upgrade at once too.
func (m *RWMutex) upgrade(ctx context.Context, op string) error {
	if err := m.h.Check(); err != nil {
		return err
	}
	owner, ok := dsync.OwnerFrom(ctx)
	if !ok {
		return nil
	}
	// The owner's write hold may be kept through another backend value
	// of the process: the server counts it as the owner's.
	if s := m.h.Session(); !s.Sched.Holds(m.h.Key, owner, read) || s.Sched.Holds(m.h.Key, owner, core.Exclusive) ||
		s.Holding(m.h.Key, owner, core.Exclusive) {
		return nil
	}
	return m.h.Wrap(op, fmt.Errorf("%w: the owner holds a read hold", dsync.ErrUpgrade))
}

// spec describes the acquisitions of role to the lock core. It has no
// Local: queueing in the process first would reorder the writers. It is
// Plain on both sides: the lock's main key exists whenever anything else
// is on the lock (see lua/rw.lua), so that a plain SET NX of it takes only
// a lock that nothing is on.
func (m *RWMutex) spec(role string) (core.LockSpec, core.HoldSpec) {
	s := core.LockSpec{
		Role:      role,
		Channel:   m.channel,
		Heartbeat: m.h.Cfg.WaiterTimeout / 3,
		Handed:    m.h.HandedLease(),
		EntryTTL:  m.h.Cfg.WaiterTimeout,
		Keys:      m.keys,
		Acquire:   writeAcquireScript,
		Abandon:   abandonScript,
		Args:      []any{m.pref, "w"},
		Fence:     true,
		Refine:    upgradeError,
		Plain:     true,
	}
	h := core.HoldSpec{Role: role, Channel: m.channel, Renew: renewWriteScript, Keys: m.keys[:1], Token: tokenScript, TokenKeys: m.keys}
	if role == read {
		s.Acquire, s.Args = readAcquireScript, []any{m.pref, "r"}
		// A lone read hold is the lock's main key (see lua/rw.lua).
		h.Renew, h.Keys, h.Token, h.TokenKeys = renewReadScript, m.keys[:3], nil, nil
	}
	return s, h
}

// upgradeError makes the acquire script's refusal of an upgrade match
// dsync.ErrUpgrade.
func upgradeError(err error) error {
	var se *backend.ServerError
	if errors.As(err, &se) && strings.Contains(se.Message, errUpgrade) {
		return fmt.Errorf("%w: %w", dsync.ErrUpgrade, err)
	}
	return err
}
