package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/fairlock"
	"github.com/dsyncgo/dsync/internal/keys"
	"github.com/dsyncgo/dsync/mutex"
)

// Kinds of lock the admin commands know.
const (
	kindMutex    = "mutex"
	kindFairlock = "fairlock"
)

// kindFlag is -kind: mutex or fairlock.
type kindFlag string

func (k *kindFlag) String() string { return string(*k) }

func (k *kindFlag) Set(s string) error {
	switch s {
	case kindMutex, kindFairlock:
		*k = kindFlag(s)
		return nil
	}
	return fmt.Errorf("want %s or %s", kindMutex, kindFairlock)
}

// adminFlags are the flags of the commands that look at a server's locks.
type adminFlags struct {
	addr    string
	prefix  string
	kind    kindFlag
	timeout time.Duration
}

func (a *adminFlags) register(fs *flagSet) {
	a.kind = kindMutex
	fs.StringVar(&a.addr, "redis", "", "`host:port` of the Redis server (required)")
	fs.StringVar(&a.prefix, "prefix", keys.DefaultPrefix, "key `prefix` of the locks")
	fs.Var(&a.kind, "kind", "`kind` of lock: mutex or fairlock")
	fs.DurationVar(&a.timeout, "timeout", defaultTimeout, "give up on a server that does not connect or answer a call within this `duration`")
}

// check reports missing or bad flags as a usage error.
func (a *adminFlags) check() error {
	if a.addr == "" {
		return usagef("-redis host:port is required")
	}
	if a.timeout <= 0 {
		return usagef("-timeout must be positive")
	}
	return nil
}

// lockState is what inspect and list report of one lock; its JSON form is
// documented in the package comment.
type lockState struct {
	Kind        string   `json:"kind"`
	Name        string   `json:"name"`
	Key         string   `json:"key"`
	Locked      bool     `json:"locked"`
	Holder      string   `json:"holder"`
	HoldCount   int      `json:"hold_count"`
	Token       int64    `json:"token"`
	LeaseMS     int64    `json:"lease_ms"`
	Waiters     int      `json:"waiters"`
	NextWaiters []string `json:"next_waiters,omitzero"` // non-nil for a mutex
}

// lease is the remaining lease as a duration, -1 for none.
func (s lockState) lease() time.Duration {
	if s.LeaseMS < 0 {
		return -1
	}
	return time.Duration(s.LeaseMS) * time.Millisecond
}

// readState reads the state of the lock of the given kind and name.
func readState(ctx context.Context, b backend.Backend, kind, prefix, name string) (lockState, error) {
	key, err := keys.Base(prefix, kind, name)
	if err != nil {
		return lockState{}, err
	}
	s := lockState{Kind: kind, Name: name, Key: key}
	var ttl time.Duration
	switch kind {
	case kindFairlock:
		st, err := fairlock.New(b, name, fairlock.WithPrefix(prefix)).State(ctx)
		if err != nil {
			return lockState{}, err
		}
		s.Locked, s.Holder, s.HoldCount, s.Token, s.Waiters = st.Locked, st.Holder, st.HolderCount, st.Token, st.Queued
		ttl = st.TTL
	default:
		st, err := mutex.New(b, name, mutex.WithPrefix(prefix)).State(ctx)
		if err != nil {
			return lockState{}, err
		}
		s.Locked, s.Holder, s.HoldCount, s.Token, s.Waiters = st.Locked, st.Holder, st.HolderCount, st.Token, st.Waiters
		s.NextWaiters = append([]string{}, st.NextWaiters...)
		ttl = st.TTL
	}
	switch {
	case !s.Locked:
		s.LeaseMS = 0
	case ttl < 0:
		s.LeaseMS = -1
	default:
		s.LeaseMS = ttl.Milliseconds()
	}
	return s, nil
}

// describeLease says how long the lease has left.
func describeLease(s lockState) string {
	if d := s.lease(); d >= 0 {
		return d.Round(time.Millisecond).String() + " left"
	}
	return "no expiry"
}

// writeText prints s for a person.
func (s lockState) writeText(w io.Writer) {
	if !s.Locked {
		fmt.Fprintf(w, "%s %q: free (key %s)\n", s.Kind, s.Name, s.Key)
		if s.Token > 0 {
			fmt.Fprintf(w, "  last token: %d\n", s.Token)
		}
	} else {
		fmt.Fprintf(w, "%s %q: locked (key %s)\n", s.Kind, s.Name, s.Key)
		fmt.Fprintf(w, "  holder:     %s\n", printable(s.Holder))
		fmt.Fprintf(w, "  hold count: %d\n", s.HoldCount)
		fmt.Fprintf(w, "  token:      %d\n", s.Token)
		fmt.Fprintf(w, "  lease:      %s\n", describeLease(s))
	}
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

const inspectDoc = `inspect prints the state of the lock called name: the holder's owner id,
its hold count, its fencing token (the last one if the lock is free), the
remaining lease, and the waiters (for a mutex, how many and the owner ids
of the first few; for a fair lock, the length of its queue). Flags may
follow the name.

With -json it prints one JSON object with the fields
  kind          "mutex" or "fairlock"
  name          the lock's name
  key           its main key on the server
  locked        whether any owner holds it
  holder        the holder's owner id; "" if free
  hold_count    the holder's hold count; 0 if free
  token         the holder's fencing token, or the last one if free; 0 if none known
  lease_ms      remaining lease in milliseconds; 0 if free, -1 if the key has no expiry
  waiters       mutex: waiters registered on the server; fairlock: live waiters queued
  next_waiters  mutex only: owner ids of the first few waiters, next first`

// inspect prints the state of a lock on a server.
func inspect(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "inspect", inspectDoc)
	var a adminFlags
	a.register(fs)
	asJSON := fs.Bool("json", false, "print one JSON object")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if err := a.check(); err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one lock name, got %d arguments", len(pos))
	}
	name := pos[0]
	if _, err := keys.Base(a.prefix, string(a.kind), name); err != nil {
		return usagef("%v", err)
	}

	srv, err := openServer(ctx, a.addr, a.timeout)
	if err != nil {
		return err
	}
	defer srv.close()
	c := srv.client()
	defer c.close()
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	s, err := readState(ctx, c.b, string(a.kind), a.prefix, name)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	s.writeText(e.stdout)
	return nil
}
