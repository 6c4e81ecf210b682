package election

import (
	"context"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/core"
	"github.com/dsyncgo/dsync/internal/lease"
)

// Campaign makes the caller a candidate with the given value and blocks
// until it leads or ctx ends. Candidates lead in the order their campaigns
// reached the server; a candidate's value is what Leader and Observe
// report while it leads, and may be any string (an address, an id), best
// kept small: observers receive it with every change.
//
// Every Campaign is a candidate of its own, whatever owner ctx carries: a
// process that campaigns twice in one election queues behind itself. A
// live candidate keeps its place however long it waits (it beats every
// third of the waiter timeout); one whose process dies is skipped once
// its place expires.
//
// When ctx ends first, Campaign returns an error matching ctx.Err(), at
// most half a second after ctx's deadline, and leaves nothing queued; a
// term handed to it meanwhile is passed on to the next candidate. It
// rides out the backend errors that may pass (connection failures, a
// restarting or failing-over server) until then, and returns at once
// those that cannot: dsync.ErrClosed for a closed backend,
// dsync.ErrUnexpectedReply for an election key that dsync did not write
// (or an adapter that breaks the reply contract), and, before any I/O,
// bad arguments (see New: dsync.ErrInvalidBackend, ErrInvalidName,
// ErrInvalidLease). Retrying any of these is futile; Run returns them.
func (e *Election) Campaign(ctx context.Context, value string) (*Term, error) {
	c := e.candidate(value)
	if err := e.h.Lock(dsync.WithOwner(ctx), &c.spec); err != nil {
		return nil, err
	}
	return newTerm(e, c.l, value), nil
}

// TryCampaign makes one attempt to lead, without waiting: it leads only
// if no term is on and no live candidate is queued. It reports whether it
// leads, with the term if so. When it fails with an error, nothing is left
// on the server.
func (e *Election) TryCampaign(ctx context.Context, value string) (*Term, bool, error) {
	c := e.candidate(value)
	ok, err := e.h.TryLock(dsync.WithOwner(ctx), &c.spec)
	if err != nil || !ok {
		return nil, false, err
	}
	return newTerm(e, c.l, value), true, nil
}

// candidate is one campaign: the election's acquisition with its value.
type candidate struct {
	spec  core.LockSpec
	args  [3]any // spec.Args
	value string
	l     *lease.Lease // the term's, once it leads
}

func (e *Election) candidate(value string) *candidate {
	c := &candidate{spec: e.spec, value: value}
	// The fence ttl and the observe channel, boxed once by New for the
	// release (none on a handle New refused, whose calls fail before any
	// I/O), then the value: the arguments are part of the candidate.
	copy(c.args[:2], e.release.Args)
	c.args[2] = value
	c.spec.Args = c.args[:]
	c.spec.Kept = func(_ string, _ bool, l *lease.Lease) { c.l = l }
	return c
}
