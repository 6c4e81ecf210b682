package rwlock

import (
	"context"
	"errors"
	"time"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/core"
)

// Token returns the fencing token of the write hold of ctx's owner (or of
// the newest ownerless write hold taken through m). A write hold's token
// is above that of every hold before it, read or write, whoever took it;
// re-entering returns the same token. The first Token of a write hold
// taken with one plain SET (a lone writer's) draws its token on the
// server, one round trip bounded by ctx; otherwise it does no I/O. It
// returns an error matching dsync.ErrNotHeld if there is no such hold or
// it was lost. A reader has nothing to fence, as readers share the lock, and a
// read hold's token is not exported.
func (m *RWMutex) Token(ctx context.Context) (int64, error) {
	return m.h.Token(ctx, &m.writeHold)
}

// Done returns a channel that is closed when the write hold of ctx's
// owner (or the newest ownerless write hold taken through m) ends: lost,
// because a renewal found it gone or renewals failed until its lease ran
// out, or released by its final unlock. If there is no such hold, the
// channel is already closed. It does no I/O.
func (m *RWMutex) Done(ctx context.Context) <-chan struct{} {
	return m.h.Done(ctx, core.Exclusive)
}

// RDone is Done for the read hold of ctx's owner (or the newest ownerless
// read hold taken through m). Each owner's read hold has a lease of its
// own: one reader's loss leaves the others' holds alone.
func (m *RWMutex) RDone(ctx context.Context) <-chan struct{} {
	return m.h.Done(ctx, read)
}

// Mode is what a read-write lock is held for.
type Mode int

const (
	Free  Mode = iota // nothing is held
	Read              // read holds only
	Write             // a write hold, and perhaps its owner's read hold
)

func (md Mode) String() string {
	switch md {
	case Free:
		return "free"
	case Read:
		return "read"
	case Write:
		return "write"
	}
	return "Mode(?)"
}

// State is a snapshot of a read-write lock on the server.
type State struct {
	Mode Mode

	Writer      string        // the write holder's owner id; "" if none
	WriterCount int           // the write holder's write hold count
	TTL         time.Duration // the write hold's remaining lease; -1 if it has no expiry, 0 if none
	Token       int64         // the write hold's fencing token, or the last one handed out (0 if none is known)
	Readers     int           // owners holding read holds

	WriteCount int // write holds of the asking owner
	ReadCount  int // read holds of the asking owner

	WaitingWriters int // live writers queued
	WaitingReaders int // live readers registered as waiting
}

// State reads the lock's state in one round trip. The asking owner is
// ctx's owner, or the owner of the newest ownerless write hold taken
// through m, else of its newest ownerless read hold. Read holds lost with
// the lock's main key (see Keys in the package documentation) are
// dropped, as the next acquisition or release would drop them, not
// reported.
func (m *RWMutex) State(ctx context.Context) (State, error) {
	if err := m.h.Begin("state", ctx); err != nil {
		return State{}, err
	}
	owner, l := m.h.Current(ctx, core.Exclusive)
	if l == nil {
		if o, rl := m.h.Current(ctx, read); rl != nil {
			owner = o
		}
	}
	reply, err := m.h.B.Eval(ctx, inspectScript, m.keys, m.h.QueryArgs(owner)...)
	if err != nil {
		return State{}, m.h.Wrap("state", err)
	}
	n, err := backend.Array(reply, 10)
	if err != nil {
		return State{}, m.h.Wrap("state", err)
	}
	var v [10]int64
	for i := 1; i < 9; i++ {
		if v[i], err = backend.Int(n[i]); err != nil {
			return State{}, m.h.Wrap("state", err)
		}
	}
	writer, err1 := backend.String(n[0])
	_, err2 := backend.String(n[9])
	if err1 != nil || err2 != nil {
		return State{}, m.h.Wrap("state", errors.Join(err1, err2))
	}
	s := State{
		Writer: writer, WriterCount: int(v[1]), Token: v[3], Readers: int(v[4]),
		WriteCount: int(v[5]), ReadCount: int(v[6]), WaitingWriters: int(v[7]), WaitingReaders: int(v[8]),
	}
	switch {
	case writer != "":
		s.Mode = Write
	case s.Readers > 0:
		s.Mode = Read
	}
	switch {
	case v[2] >= 0:
		s.TTL = time.Duration(v[2]) * time.Millisecond
	case v[2] == -1:
		s.TTL = -1
	}
	return s, nil
}

// ForceUnlock takes every hold of the lock, write and read, whoever holds
// them, and passes the lock on as a release does. It reports whether
// anything was held. A holder in this process learns of the loss at once
// through Done or RDone; one in another process at its next renewal, or,
// on a fixed lease, when the lease ends.
func (m *RWMutex) ForceUnlock(ctx context.Context) (bool, error) {
	return m.h.ForceUnlock(ctx, 0, &m.force)
}
