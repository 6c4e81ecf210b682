package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/fairlock"
	"github.com/dsyncgo/dsync/internal/keys"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/rwlock"
	"github.com/dsyncgo/dsync/semaphore"
)

// Kinds of lock the admin commands know. An election is one: its term is
// an exclusive hold with a value.
const (
	kindMutex     = "mutex"
	kindFairlock  = "fairlock"
	kindRWLock    = "rwlock"
	kindSemaphore = "semaphore"
	kindElection  = "election"
)

// kinds lists them in the order usage shows them.
var kinds = []string{kindMutex, kindFairlock, kindRWLock, kindSemaphore, kindElection, kindWaitGroup}

// kindFlag is -kind.
type kindFlag string

func (k *kindFlag) String() string { return string(*k) }

func (k *kindFlag) Set(s string) error {
	for _, kind := range kinds {
		if s == kind {
			*k = kindFlag(s)
			return nil
		}
	}
	return fmt.Errorf("want one of %s", strings.Join(kinds, ", "))
}

// lockState is what inspect and list report of one lock; its JSON form is
// documented in the package comment. The fields of the embedded structs
// are those of the kinds that have them, and absent from the others.
type lockState struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Key    string `json:"key"`
	Locked bool   `json:"locked"` // any hold: a holder, a reader, a permit
	*Exclusive
	*ReadWrite
	*Permits
	*Leadership
	*Units
	Waiters     int      `json:"waiters"`
	NextWaiters []string `json:"next_waiters,omitzero"` // non-nil for a mutex
}

// Exclusive is the state of the hold of a mutex or a fair lock, or the
// write hold of a read-write lock.
type Exclusive struct {
	Holder    string `json:"holder"`     // "" if none
	HoldCount int    `json:"hold_count"` // 0 if none
	Token     int64  `json:"token"`      // the hold's, or the last one; 0 if none is known
	LeaseMS   int64  `json:"lease_ms"`   // 0 if no hold, -1 if the key has no expiry
}

// ReadWrite is the rest of the state of a read-write lock.
type ReadWrite struct {
	Mode           string `json:"mode"`    // free, read or write
	Readers        int    `json:"readers"` // owners holding read holds
	WaitingWriters int    `json:"waiting_writers"`
	WaitingReaders int    `json:"waiting_readers"`
}

// Permits is the state of a semaphore.
type Permits struct {
	Capacity    int64 `json:"capacity"`     // in force; 0 if unknown (a free semaphore)
	CapacitySet bool  `json:"capacity_set"` // set at runtime (SetCapacity)
	Held        int64 `json:"held"`
	Available   int64 `json:"available"`
	Holders     int   `json:"holders"` // owners holding permits
}

// Leadership is the rest of the state of an election, whose term is its
// exclusive hold (holder: the campaign's owner id; hold_count: 1).
type Leadership struct {
	Value      string   `json:"value"`      // the leader's; "" if none
	BeganMS    int64    `json:"began_ms"`   // when the term began, in Unix ms by the server's clock; 0 if none or unknown
	Candidates []string `json:"candidates"` // values of the first candidates queued, next first
}

// lease is the remaining lease of the exclusive hold as a duration, -1 for
// none.
func (s lockState) lease() time.Duration {
	if s.LeaseMS < 0 {
		return -1
	}
	return time.Duration(s.LeaseMS) * time.Millisecond
}

// leaseMS is the JSON form of a hold's remaining lease.
func leaseMS(held bool, ttl time.Duration) int64 {
	switch {
	case !held:
		return 0
	case ttl < 0:
		return -1
	}
	return ttl.Milliseconds()
}

// unknownCapacity is the capacity of the semaphore handle inspect reads
// through: State reports the capacity in force, or, for a semaphore with
// no state on the server and none set at runtime, the handle's own, which
// no semaphore in use has.
const unknownCapacity = semaphore.MaxCapacity

// readState reads the state of the lock of the given kind and name.
func readState(ctx context.Context, b backend.Backend, kind, prefix, name string) (lockState, error) {
	key, err := keys.Base(prefix, kind, name)
	if err != nil {
		return lockState{}, err
	}
	s := lockState{Kind: kind, Name: name, Key: key}
	switch kind {
	case kindFairlock:
		st, err := fairlock.New(b, name, fairlock.WithPrefix(prefix)).State(ctx)
		if err != nil {
			return lockState{}, err
		}
		s.Locked, s.Waiters = st.Locked, st.Queued
		s.Exclusive = &Exclusive{st.Holder, st.HolderCount, st.Token, leaseMS(st.Locked, st.TTL)}
	case kindRWLock:
		st, err := rwlock.New(b, name, rwlock.WithPrefix(prefix)).State(ctx)
		if err != nil {
			return lockState{}, err
		}
		s.Locked, s.Waiters = st.Mode != rwlock.Free, st.WaitingWriters+st.WaitingReaders
		s.Exclusive = &Exclusive{st.Writer, st.WriterCount, st.Token, leaseMS(st.Writer != "", st.TTL)}
		s.ReadWrite = &ReadWrite{st.Mode.String(), st.Readers, st.WaitingWriters, st.WaitingReaders}
	case kindElection:
		st, err := election.New(b, name, election.WithPrefix(prefix)).State(ctx)
		if err != nil {
			return lockState{}, err
		}
		led := !st.Leader.IsZero()
		s.Locked, s.Waiters = led, st.Queued
		s.Exclusive = &Exclusive{Token: st.LastToken, LeaseMS: leaseMS(led, st.TTL)}
		if led {
			s.Holder, s.HoldCount = st.Owner, 1
		}
		s.Leadership = &Leadership{Value: st.Leader.Value, Candidates: append([]string{}, st.Candidates...)}
		if !st.Leader.Began.IsZero() {
			s.BeganMS = st.Leader.Began.UnixMilli()
		}
	case kindWaitGroup:
		if err := readWaitGroup(ctx, b, prefix, name, &s); err != nil {
			return lockState{}, err
		}
	case kindSemaphore:
		st, err := semaphore.New(b, name, unknownCapacity, semaphore.WithPrefix(prefix)).State(ctx)
		if err != nil {
			return lockState{}, err
		}
		s.Locked, s.Waiters = st.Held > 0, st.Queued
		s.Permits = &Permits{st.Capacity, st.Set, st.Held, st.Available, st.Holders}
		if st.Capacity == unknownCapacity {
			s.Capacity, s.Available = 0, 0
		}
	default:
		st, err := mutex.New(b, name, mutex.WithPrefix(prefix)).State(ctx)
		if err != nil {
			return lockState{}, err
		}
		s.Locked, s.Waiters = st.Locked, st.Waiters
		s.Exclusive = &Exclusive{st.Holder, st.HolderCount, st.Token, leaseMS(st.Locked, st.TTL)}
		s.NextWaiters = append([]string{}, st.NextWaiters...)
	}
	return s, nil
}

// describeLease says how long the exclusive hold's lease has left.
func describeLease(s lockState) string {
	if d := s.lease(); d >= 0 {
		return d.Round(time.Millisecond).String() + " left"
	}
	return "no expiry"
}

// writeText prints s for a person.
func (s lockState) writeText(w io.Writer) {
	switch s.Kind {
	case kindSemaphore:
		s.writeSemaphore(w)
		return
	case kindRWLock:
		s.writeRWLock(w)
		return
	case kindElection:
		s.writeElection(w)
		return
	case kindWaitGroup:
		s.writeWaitGroup(w)
		return
	}
	s.writeExclusive(w, "locked")
	if s.Kind == kindFairlock {
		if s.Locked || s.Waiters > 0 {
			fmt.Fprintf(w, "  queued:     %d\n", s.Waiters)
		}
		return
	}
	if s.Locked || s.Waiters > 0 {
		line := fmt.Sprint(s.Waiters)
		if len(s.NextWaiters) > 0 {
			ids := make([]string, len(s.NextWaiters))
			for i, id := range s.NextWaiters {
				ids[i] = printable(id)
			}
			next := strings.Join(ids, ", ")
			if len(s.NextWaiters) < s.Waiters {
				next += ", …"
			}
			line += " (next: " + next + ")"
		}
		fmt.Fprintf(w, "  waiters:    %s\n", line)
	}
}

// writeExclusive prints the first lines of a lock with an exclusive hold:
// whether it is held (as what), and the hold.
func (s lockState) writeExclusive(w io.Writer, held string) {
	if s.Holder == "" {
		free := "free"
		if s.Locked {
			free = held
		}
		fmt.Fprintf(w, "%s %q: %s (key %s)\n", s.Kind, s.Name, free, s.Key)
		if s.Token > 0 {
			fmt.Fprintf(w, "  last token: %d\n", s.Token)
		}
		return
	}
	fmt.Fprintf(w, "%s %q: %s (key %s)\n", s.Kind, s.Name, held, s.Key)
	fmt.Fprintf(w, "  holder:     %s\n", printable(s.Holder))
	fmt.Fprintf(w, "  hold count: %d\n", s.HoldCount)
	fmt.Fprintf(w, "  token:      %d\n", s.Token)
	fmt.Fprintf(w, "  lease:      %s\n", describeLease(s))
}

func (s lockState) writeRWLock(w io.Writer) {
	held := "write-locked"
	if s.Mode == rwlock.Read.String() {
		held = "read-locked"
	}
	s.writeExclusive(w, held)
	if s.Locked || s.Waiters > 0 {
		fmt.Fprintf(w, "  readers:    %d\n", s.Readers)
		fmt.Fprintf(w, "  waiting:    %s, %s\n", plural(s.WaitingWriters, "writer"), plural(s.WaitingReaders, "reader"))
	}
}

func (s lockState) writeSemaphore(w io.Writer) {
	switch {
	case s.Locked:
		fmt.Fprintf(w, "%s %q: %d of %d permits held (key %s)\n", s.Kind, s.Name, s.Held, s.Capacity, s.Key)
	default:
		fmt.Fprintf(w, "%s %q: free (key %s)\n", s.Kind, s.Name, s.Key)
	}
	switch {
	case s.Capacity == 0:
		fmt.Fprintf(w, "  capacity:   none recorded (the handles' own applies)\n")
	case s.CapacitySet:
		fmt.Fprintf(w, "  capacity:   %d (set at runtime)\n", s.Capacity)
	default:
		fmt.Fprintf(w, "  capacity:   %d\n", s.Capacity)
	}
	if s.Locked || s.Waiters > 0 {
		fmt.Fprintf(w, "  available:  %d\n", s.Available)
		fmt.Fprintf(w, "  holders:    %d\n", s.Holders)
		fmt.Fprintf(w, "  queued:     %d\n", s.Waiters)
	}
}

func (s lockState) writeElection(w io.Writer) {
	if !s.Locked {
		fmt.Fprintf(w, "%s %q: no leader (key %s)\n", s.Kind, s.Name, s.Key)
		if s.Token > 0 {
			fmt.Fprintf(w, "  last token: %d\n", s.Token)
		}
	} else {
		fmt.Fprintf(w, "%s %q: led (key %s)\n", s.Kind, s.Name, s.Key)
		fmt.Fprintf(w, "  leader:     %s\n", printable(s.Value))
		fmt.Fprintf(w, "  owner:      %s\n", printable(s.Holder))
		fmt.Fprintf(w, "  token:      %d\n", s.Token)
		if s.BeganMS > 0 {
			began := time.UnixMilli(s.BeganMS)
			fmt.Fprintf(w, "  began:      %s (%s ago)\n", began.UTC().Format(time.RFC3339Nano), time.Since(began).Round(time.Millisecond))
		}
		fmt.Fprintf(w, "  lease:      %s\n", describeLease(s))
	}
	if s.Locked || s.Waiters > 0 {
		line := fmt.Sprint(s.Waiters)
		if len(s.Candidates) > 0 {
			vs := make([]string, len(s.Candidates))
			for i, v := range s.Candidates {
				vs[i] = printable(v)
			}
			next := strings.Join(vs, ", ")
			if len(s.Candidates) < s.Waiters {
				next += ", …"
			}
			line += " (next: " + next + ")"
		}
		fmt.Fprintf(w, "  candidates: %s\n", line)
	}
}
