// Package session holds the per-server state of one backend value: its
// lease scheduler with the index of its holds, and its pub/sub hub. Every
// handle on the backend value shares the session, which is made on first
// use and retired when idle: no lease kept, no channel subscribed.
//
// A hold belongs to its owner and to the session that took it, as in
// Redisson and etcd: queries and releases through a handle on another
// backend value of the process do not find it (see Holding).
//
// The package doc of internal/core maps internal/.
package session

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/codec"
	"github.com/dsyncgo/dsync/internal/hub"
	"github.com/dsyncgo/dsync/internal/lease"
)

// Session is the per-server state of one backend value.
type Session struct {
	B     backend.Backend
	Hub   *hub.Hub
	Sched *lease.Scheduler

	retired atomic.Bool

	mu       sync.Mutex
	attached map[string]*attachment // see Attach

	lookMu sync.Mutex                       // serializes the writers of looks
	looks  atomic.Pointer[map[string]int64] // see SetLook; copied on write, read without a lock
}

// attachment is a value a primitive keeps in the session.
type attachment struct {
	v    any
	refs int
}

// sessions finds the session of a backend value: the one lookup by
// backend in the process, so that handles made with the same backend
// value share their session.
var sessions struct {
	mu sync.Mutex
	m  map[backend.Backend]*Session
}

// For returns b's session, made if b has none.
func For(b backend.Backend) *Session {
	sessions.mu.Lock()
	defer sessions.mu.Unlock()
	s := sessions.m[b]
	if s == nil {
		s = &Session{B: b}
		s.Hub = hub.New(b, s.idle)
		s.Sched = lease.NewScheduler(b, lease.Hooks{Watch: s.Hub.Watch, Idle: s.idle, Wake: s.wake})
		if sessions.m == nil {
			sessions.m = make(map[backend.Backend]*Session)
		}
		sessions.m[b] = s
		// Made for a call that may keep nothing and subscribe nothing:
		// it retires when idle all the same.
		s.Sched.IdleSoon()
	}
	return s
}

// Lookup returns b's session, or nil if b has none: nothing is held or
// waited for through b.
func Lookup(b backend.Backend) *Session {
	sessions.mu.Lock()
	defer sessions.mu.Unlock()
	return sessions.m[b]
}

// Retired reports whether s retired; a caller holding it asks For again.
func (s *Session) Retired() bool { return s.retired.Load() }

// idle retires s if it keeps no lease, has no channel subscribed and
// nothing attached.
func (s *Session) idle() {
	sessions.mu.Lock()
	defer sessions.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if sessions.m[s.B] != s || len(s.attached) > 0 || !s.Sched.Retire() {
		return
	}
	if !s.Hub.Retire() {
		s.Sched.Revive()
		return
	}
	s.retired.Store(true)
	delete(sessions.m, s.B)
}

// Attach returns the value that the session keeps under key for a
// primitive (the feed of an election's observers, say), made with create
// if there is none, and counts a reference to it; ok is false if the
// session retired, and the caller asks For again. Detach drops the
// reference: the value is forgotten with its last one, and the session
// does not retire while any value is attached.
func (s *Session) Attach(key string, create func() any) (v any, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.retired.Load() {
		return nil, false
	}
	a := s.attached[key]
	if a == nil {
		if s.attached == nil {
			s.attached = make(map[string]*attachment)
		}
		a = &attachment{v: create()}
		s.attached[key] = a
	}
	a.refs++
	return a.v, true
}

// Detach drops a reference to v that Attach counted under key, and
// reports whether it was the last one: the value is then forgotten. A
// value forgotten already (see Forget) is left alone.
func (s *Session) Detach(key string, v any) (last bool) {
	s.mu.Lock()
	a := s.attached[key]
	if a != nil && a.v == v {
		if a.refs--; a.refs <= 0 {
			delete(s.attached, key)
			last = true
		}
	}
	empty := len(s.attached) == 0
	s.mu.Unlock()
	if last && empty {
		s.idle()
	}
	return last
}

// Forget forgets the value v attached under key, whatever references are
// left: the value ended on its own, and the next Attach makes another.
func (s *Session) Forget(key string, v any) {
	s.mu.Lock()
	if a := s.attached[key]; a != nil && a.v == v {
		delete(s.attached, key)
	}
	empty := len(s.attached) == 0
	s.mu.Unlock()
	if empty {
		s.idle()
	}
}

// wake wakes the waiters of s at the given entries on channel: waiters
// queued behind a hold that ended without carrying them.
func (s *Session) wake(channel string, entries []string) {
	for _, e := range entries {
		if id, ok := s.Hub.Local(codec.EntryAddress(e)); ok {
			s.Hub.Deliver(channel, id, "")
		}
	}
}

// Holding reports whether another session of the process than s keeps
// an active hold of key, owner and role: a release through s then fails
// saying so, instead of finding nothing.
func (s *Session) Holding(key, owner, role string) bool {
	sessions.mu.Lock()
	others := make([]*Session, 0, len(sessions.m))
	for _, x := range sessions.m {
		if x != s {
			others = append(others, x)
		}
	}
	sessions.mu.Unlock()
	for _, x := range others {
		if x.Sched.Holds(key, owner, role) {
			return true
		}
	}
	return false
}

// LoseHold ends as lost the lease of key whose hold has the given id in
// every session of the process: ForceUnlock took that hold. If no session
// keeps it, every session remembers it, so that a waiter handed the hold
// and not yet keeping it starts its lease lost.
func LoseHold(key, id, reason string) {
	sessions.mu.Lock()
	all := make([]*Session, 0, len(sessions.m))
	for _, x := range sessions.m {
		all = append(all, x)
	}
	sessions.mu.Unlock()
	found := false
	for _, x := range all {
		if x.Sched.LoseHold(key, id, reason, false) {
			found = true
		}
	}
	if !found {
		for _, x := range all {
			x.Sched.LoseHold(key, id, reason, true)
		}
	}
}

// Stats reports, for b, the leases being kept and the renewal calls made
// so far by its current session.
func Stats(b backend.Backend) (leases int, calls int64) {
	if s := Lookup(b); s != nil {
		return s.Sched.Stats()
	}
	return 0, 0
}

// Topics reports how many channels b's session has subscribed.
func Topics(b backend.Backend) int {
	if s := Lookup(b); s != nil {
		return s.Hub.Topics()
	}
	return 0
}

// lookHorizon is how long past its time a look is kept when it was not
// made: the waiter it was for has long tried or left.
const lookHorizon = time.Minute

// SetLook records that a short release through the session of the
// primitive whose main key is key is to look at its queue from at (Unix
// ns) on: a release through it woke a waiter of another session to try
// (see core.ReleaseSpec.LookArgs). It is the session's, not a handle's, so
// that a process that makes a handle for each use looks all the same.
func (s *Session) SetLook(key string, at int64) {
	s.updateLooks(func(m map[string]int64) { m[key] = at })
}

// Look returns when a short release of the primitive at key is to look at
// its queue (see SetLook), or 0 for never; it takes no lock.
func (s *Session) Look(key string) int64 {
	m := s.looks.Load()
	if m == nil {
		return 0
	}
	return (*m)[key]
}

// LookDone forgets the look at key recorded for at, once a release made
// with it freed the primitive; a look recorded since is kept.
func (s *Session) LookDone(key string, at int64) {
	if s.Look(key) != at {
		return
	}
	s.updateLooks(func(m map[string]int64) {
		if m[key] == at {
			delete(m, key)
		}
	})
}

// updateLooks replaces the looks with a copy that change modified, less
// the looks past lookHorizon.
func (s *Session) updateLooks(change func(map[string]int64)) {
	s.lookMu.Lock()
	defer s.lookMu.Unlock()
	old := s.looks.Load()
	m := make(map[string]int64)
	if old != nil {
		stale := time.Now().Add(-lookHorizon).UnixNano()
		for k, at := range *old {
			if at > stale {
				m[k] = at
			}
		}
	}
	change(m)
	if len(m) == 0 {
		s.looks.Store(nil)
		return
	}
	s.looks.Store(&m)
}
