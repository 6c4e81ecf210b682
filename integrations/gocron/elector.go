package dsyncgocron

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/go-co-op/gocron/v2"

	"github.com/dsyncgo/dsync/election"
)

// ErrNotLeader is returned by Elector.IsLeader when this scheduler does
// not lead: gocron then skips the run here.
var ErrNotLeader = errors.New("dsyncgocron: not the leader")

// An Elector is a gocron.Elector on dsync's election: the scheduler whose
// Elector leads the election runs every job; the others skip them. Run
// campaigns, and campaigns again after each term (election.Run), until
// its ctx ends; IsLeader answers from memory, without I/O.
//
//	el := dsyncgocron.NewElector(election.New(b, "scheduler", election.WithWatchdog(2*time.Second)), hostname)
//	go el.Run(ctx)
//	s, err := gocron.NewScheduler(gocron.WithDistributedElector(el))
//
// When the leader's process dies, its term runs out with its lease (the
// election's, 30s by default; choose it as for a Locker's mutex), and the
// next scheduler leads then.
type Elector struct {
	e     *election.Election
	value string
	term  atomic.Pointer[election.Term]
}

var _ gocron.Elector = (*Elector)(nil)

// NewElector returns an Elector that campaigns in e with value (a host
// name, an instance id: what Leader and Observe report).
func NewElector(e *election.Election, value string) *Elector {
	return &Elector{e: e, value: value}
}

// Run campaigns until ctx ends, leading whenever it wins, and resigns
// when ctx ends. It returns election.Run's error: one matching ctx.Err(),
// or an error that cannot pass (bad arguments, dsync.ErrClosed,
// dsync.ErrUnexpectedReply), after which IsLeader reports ErrNotLeader.
func (el *Elector) Run(ctx context.Context) error {
	return el.e.Run(ctx, el.value, func(ctx context.Context, t *election.Term) error {
		el.term.Store(t)
		<-ctx.Done()
		el.term.CompareAndSwap(t, nil)
		return nil
	})
}

// IsLeader returns nil if this scheduler leads, and ErrNotLeader if not.
// A term that is over (lost, or its lease run out while this process was
// paused) does not lead, even before Run has taken note.
func (el *Elector) IsLeader(context.Context) error {
	if el.Term() == nil {
		return ErrNotLeader
	}
	return nil
}

// Term returns the term this scheduler leads in, or nil: a job run by the
// leader passes its Token with its writes (see package election).
func (el *Elector) Term() *election.Term {
	t := el.term.Load()
	if t == nil {
		return nil
	}
	select {
	case <-t.Done():
		return nil
	default:
		return t
	}
}
