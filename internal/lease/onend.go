package lease

// EndHook is one function that OnEnd or Attach arranged to call.
type EndHook struct {
	l   *Lease // nil if it was arranged after the end
	fn  func(arg any, lost bool, reason string)
	arg any
}

// OnEnd arranges for f to be called, once, when the lease ends, with
// whether it was lost and why (see Reason); at once, in the calling
// goroutine, if it has ended already. Any number of functions may wait on
// one lease, each until its Stop is called.
//
// f is called with the scheduler's lock held, in the same step that closes
// Done, so that nothing can see the lease ended and f not yet called: it
// must be quick and must not call the lease or the scheduler. A context's
// cancel function qualifies: it starts no callback of its own in the
// calling goroutine.
func (l *Lease) OnEnd(f func(lost bool, reason string)) *EndHook {
	h := &EndHook{}
	l.Attach(h, callEndFunc, f)
	return h
}

// callEndFunc calls the function OnEnd was given.
func callEndFunc(f any, lost bool, reason string) { f.(func(bool, string))(lost, reason) }

// Attach is OnEnd for a hook that the caller keeps, as a field of its
// own: fn is called with arg (a pointer, say, which an interface holds
// without an allocation), so that a holder of a lease arranges for its end
// with no allocation at all. h must not be attached again while attached.
func (l *Lease) Attach(h *EndHook, fn func(arg any, lost bool, reason string), arg any) {
	h.fn, h.arg = fn, arg
	s := l.s
	s.mu.Lock()
	if l.state != active && l.state != pending {
		wasLost, reason := l.state == lost, l.reason
		s.mu.Unlock()
		fn(arg, wasLost, reason)
		return
	}
	h.l = l
	if l.onEnd == nil {
		// Most leases have one hook: it costs no slice of its own.
		l.onEnd = l.firstHook[:0]
	}
	l.onEnd = append(l.onEnd, h)
	s.mu.Unlock()
}

// Stop reports whether it stopped h's function before it was called. A
// nil EndHook has nothing to stop.
func (h *EndHook) Stop() bool {
	if h == nil || h.l == nil {
		return false
	}
	l := h.l
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	for i, x := range l.onEnd {
		if x == h {
			l.onEnd = append(l.onEnd[:i], l.onEnd[i+1:]...)
			return true
		}
	}
	return false
}

// Reason returns why the lease was lost ("hold no longer on the server",
// "taken by ForceUnlock", "renewals failed until the lease ran out", ...),
// or "" if it was not.
func (l *Lease) Reason() string {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	return l.reason
}

// runEndHooksLocked calls the functions waiting on l's end (see OnEnd).
func (l *Lease) runEndHooksLocked() {
	hooks := l.onEnd
	l.onEnd = nil
	for _, h := range hooks {
		h.fn(h.arg, l.state == lost, l.reason)
	}
}
