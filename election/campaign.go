package election

import (
	"context"

	"github.com/dsyncgo/dsync/internal/codec"
)

// Campaign makes the caller a candidate with the given value and blocks
// until it leads or ctx ends. Candidates lead in the order their campaigns
// reached the server; a candidate's value is what Leader and Observe
// report while it leads, and may be any string (an address, an id), best
// kept small: observers receive it with every change.
//
// With nobody leading and nobody queued, Campaign takes the term in one
// round trip of two plain commands (see Keys in the package doc): the
// term's token is drawn later, by the first call that needs it
// (Term.Token, or a read).
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
// (or an adapter that breaks the reply contract), an error reply that
// cannot pass, such as the server's refusal of a command that its ACL
// denies the backend's user (wrapping the *backend.ServerError; see
// Keys in the package doc), and, before any I/O, bad arguments (see New:
// dsync.ErrInvalidBackend, ErrInvalidName, ErrInvalidLease). Retrying any
// of these is futile; Run returns them.
func (e *Election) Campaign(ctx context.Context, value string) (*Term, error) {
	t := e.candidate(value)
	l, err := e.h.LockHold(ctx, &t.spec)
	if err != nil {
		return nil, err
	}
	t.begin(l)
	return t, nil
}

// TryCampaign makes one attempt to lead, without waiting: it leads only
// if no term is on and no live candidate is queued. It reports whether it
// leads, with the term if so. When it fails with an error, nothing is left
// on the server.
func (e *Election) TryCampaign(ctx context.Context, value string) (*Term, bool, error) {
	t := e.candidate(value)
	l, err := e.h.TryLockHold(ctx, &t.spec)
	if err != nil || l == nil {
		return nil, false, err
	}
	t.begin(l)
	return t, true, nil
}

// candidate returns the term a campaign with value would begin, not
// begun: the election's acquisition with the value, a fresh owner's (see
// e.spec).
func (e *Election) candidate(value string) *Term {
	t := &Term{e: e, spec: e.spec, value: value}
	t.spec.PlainTail = codec.TermTail(value)
	// The fence ttl and the observe channel, boxed once by New for the
	// release (none on a handle New refused, whose calls fail before any
	// I/O), then the value.
	copy(t.args[:2], e.release.Args)
	t.args[2] = value
	t.spec.Args = t.args[:]
	return t
}
