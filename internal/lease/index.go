package lease

import "time"

// The index: the leases of a session by main key, each key's leases in a
// list threaded through the leases themselves, so that indexing a hold
// allocates nothing. A session keeps at most one active lease per key,
// owner and role; a lease lost at its deadline stays indexed until the
// server's expiry (see expireLocked).

func (s *Scheduler) indexLocked(l *Lease) {
	l.nextKey = s.byKey[l.spec.Key]
	s.byKey[l.spec.Key] = l
	l.indexed = true
}

func (s *Scheduler) unindexLocked(l *Lease) {
	if !l.indexed {
		return
	}
	l.indexed = false
	p := s.byKey[l.spec.Key]
	if p == l {
		if l.nextKey == nil {
			delete(s.byKey, l.spec.Key)
		} else {
			s.byKey[l.spec.Key] = l.nextKey
		}
		l.nextKey = nil
		return
	}
	for ; p != nil; p = p.nextKey {
		if p.nextKey == l {
			p.nextKey = l.nextKey
			l.nextKey = nil
			return
		}
	}
}

// findLocked returns the lease of key, owner and role: the active one if
// any, else one lost at its deadline whose hold may still be on the
// server, else nil.
func (s *Scheduler) findLocked(key, owner, role string) *Lease {
	var expired *Lease
	for l := s.byKey[key]; l != nil; l = l.nextKey {
		if l.spec.Owner != owner || l.spec.Role != role || l.state == pending {
			continue
		}
		if l.state == active {
			return l
		}
		if expired == nil {
			expired = l
		}
	}
	return expired
}

func (s *Scheduler) byIDLocked(key, owner, role, id string) *Lease {
	for l := s.byKey[key]; l != nil; l = l.nextKey {
		if l.spec.ID == id && l.spec.Owner == owner && l.spec.Role == role {
			return l
		}
	}
	return nil
}

// Find returns the lease of key, owner and role that the session keeps
// (see findLocked), or nil.
func (s *Scheduler) Find(key, owner, role string) *Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.findLocked(key, owner, role)
}

// Other returns an active or pending lease of key in role whose owner is
// not owner, or nil: a hold of the session that owner's waiter may queue
// behind. A pending one past its deadline is dropped.
func (s *Scheduler) Other(key, owner, role string) *Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for l := s.byKey[key]; l != nil; {
		next := l.nextKey
		if l.state == pending && !now.Before(l.deadline) {
			s.dropPendingLocked(l)
		} else if (l.state == active || l.state == pending) && l.spec.Role == role && l.spec.Owner != owner {
			return l
		}
		l = next
	}
	return nil
}

// Pending records that the hold of key with the given id was handed, in
// role, to owner's waiter of the session, with the given token, and that
// the waiter has not kept it yet: until it does (Keep) or gives it up
// (DropPending), or for at most ttl, the session's other waiters queue
// behind it as behind a kept hold.
func (s *Scheduler) Pending(key, owner, role, id, channel string, token int64, ttl time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.retired || s.byIDLocked(key, owner, role, id) != nil {
		return // kept already (or retired: nothing to queue behind)
	}
	l := &Lease{spec: Spec{Key: key, Owner: owner, Role: role, ID: id, Channel: channel, Token: token}, s: s, index: -1, state: pending}
	l.token.Store(token)
	l.deadline = time.Now().Add(ttl)
	s.indexLocked(l)
}

// DropPending forgets the hold of key with the given id if it is pending:
// its waiter gave it up, and passed it on.
func (s *Scheduler) DropPending(key, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for l := s.byKey[key]; l != nil; l = l.nextKey {
		if l.spec.ID == id && l.state == pending {
			s.dropPendingLocked(l)
			return
		}
	}
}

// dropPendingLocked unindexes the pending lease l and wakes whoever queued
// behind it, who would otherwise wait out its deadline.
func (s *Scheduler) dropPendingLocked(l *Lease) {
	s.unindexLocked(l)
	l.state = released
	if len(l.queued) > 0 && s.hooks.Wake != nil {
		s.hooks.Wake(l.spec.Channel, l.queued)
	}
	l.queued = nil
	if l.inflight != nil {
		close(l.inflight)
		l.inflight = nil
	}
}

// Holds reports whether the session keeps an active lease of key, owner
// and role.
func (s *Scheduler) Holds(key, owner, role string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.findLocked(key, owner, role)
	return l != nil && l.state == active
}

// LoseHold ends as lost the lease of key whose hold has the given id,
// whoever owns it: ForceUnlock took that hold. It reports whether the
// session kept it. With remember, a lease that starts for it within
// takenMemory starts lost: the hold was handed to a waiter of the session
// that has not started keeping it yet.
func (s *Scheduler) LoseHold(key, id, reason string, remember bool) bool {
	if id == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for l := s.byKey[key]; l != nil; l = l.nextKey {
		if l.spec.ID != id {
			continue
		}
		if l.state == pending {
			// Handed to a waiter that has not kept it: its lease is
			// to start lost.
			s.dropPendingLocked(l)
			break
		}
		if l.state == active {
			s.loseLocked(l, reason, nil)
			s.idleLocked()
		}
		return true
	}
	if remember {
		s.rememberTakenLocked(key, id, reason)
	}
	return false
}

// taken remembers the ids of holds that LoseHold found no lease for: a
// hold handed to a waiter of the session that has not started keeping it
// yet. The waiter may still accept the hand-off; its lease then starts
// lost. A waiter accepts a hand-off within a second or two of it, so ids
// are kept for takenMemory, and at most maxTaken of them.
type takenHold struct {
	at     time.Time
	reason string
}

const (
	takenMemory = time.Minute
	maxTaken    = 4096
)

func takenKey(key, id string) string { return key + "\x00" + id }

func (s *Scheduler) rememberTakenLocked(key, id, reason string) {
	now := time.Now()
	if s.taken == nil {
		s.taken = make(map[string]takenHold)
	}
	if len(s.taken) >= maxTaken {
		for k, t := range s.taken {
			if now.Sub(t.at) > takenMemory || len(s.taken) >= maxTaken {
				delete(s.taken, k)
			}
		}
	}
	s.taken[takenKey(key, id)] = takenHold{now, reason}
}

// wasTakenLocked reports, once, whether the hold with the given id was
// taken before its lease started, and why.
func (s *Scheduler) wasTakenLocked(key, id string) (string, bool) {
	if len(s.taken) == 0 {
		return "", false
	}
	k := takenKey(key, id)
	t, ok := s.taken[k]
	if !ok {
		return "", false
	}
	delete(s.taken, k)
	return t.reason, time.Since(t.at) <= takenMemory
}
