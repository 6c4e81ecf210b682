package main

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/dsyncgo/dsync/internal/keys"
)

// adminFlags are the flags of the commands that look at a server's locks.
type adminFlags struct {
	conn   connFlags
	prefix string
	kind   kindFlag
}

func (a *adminFlags) register(fs *flagSet) {
	a.kind = kindMutex
	a.conn.env = true
	a.conn.register(fs, envHelp(""))
	fs.StringVar(&a.prefix, "prefix", keys.DefaultPrefix, "key `prefix` of the locks")
	fs.Var(&a.kind, "kind", "`kind` of lock: "+strings.Join(kinds, ", "))
}

// check reports missing or bad flags as a usage error.
func (a *adminFlags) check() error {
	_, err := a.conn.target()
	return err
}

const inspectDoc = `inspect prints the state of the lock of the given kind (-kind, mutex by
default) called name: for a mutex or a fair lock, the holder's owner id,
its hold count, its fencing token (the last one if the lock is free), the
remaining lease and the waiters (for a mutex, how many and the owner ids
of the first few; for a fair lock, the length of its queue); for a
read-write lock, the same of the write hold, the readers, and the writers
and readers waiting; for a semaphore, its capacity, the permits held and
available, the owners holding them and the waiters queued; for an
election, the leader's value, the owner id of its campaign, its token (the
last one if nobody leads), when its term began, the remaining lease and the
candidates queued, with the values of the first few; for a wait group, its
count, the owners of its units with their leases, the first abandonment
and the waiters. Flags may follow the name.

With -json it prints one JSON object with the fields
  kind             "mutex", "fairlock", "rwlock", "semaphore", "election"
                   or "waitgroup"
  name             the lock's name
  key              its main key on the server
  locked           whether anything is held: a hold, a read hold, a permit,
                   a term, a unit pending
  waiters          mutex: waiters registered on the server; fairlock and
                   semaphore: live waiters queued; rwlock: writers and
                   readers waiting; election: live candidates queued;
                   waitgroup: live waiters registered
and, for a mutex, a fair lock, the write side of a read-write lock and
an election (whose holder is the leader's campaign),
  holder           the holder's owner id; "" if none
  hold_count       the holder's hold count; 0 if none
  token            the holder's fencing token, or the last one; 0 if none known
  lease_ms         remaining lease in milliseconds; 0 if no hold, -1 if the
                   key has no expiry
  next_waiters     mutex only: owner ids of the first few waiters, next first
for a read-write lock,
  mode             "free", "read" or "write"
  readers          owners holding read holds
  waiting_writers  live writers queued
  waiting_readers  live readers waiting
and for a semaphore (which has no holder ids or tokens in its state),
  capacity         the capacity in force; 0 if none is recorded (free, and
                   none set at runtime)
  capacity_set     whether it was set at runtime (SetCapacity)
  held             permits held
  available        permits free
  holders          owners holding permits
and for an election,
  value            the leader's value; "" if none
  began_ms         when the term began, in Unix ms by the server's clock;
                   0 if none or unknown
  candidates       values of the first candidates queued, next first
and for a wait group,
  count            units pending, abandoned ones aside
  owners           [{owner, units, lease_ms}]: who owes them, the earliest
                   lease end first
  abandoned        {owner, units}: the first abandonment while units are
                   pending; null if none`

// inspect prints the state of a lock on a server.
func inspect(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "inspect", inspectDoc+"\n\n"+connUsage(true))
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

	srv, err := openServer(ctx, e, &a.conn)
	if err != nil {
		return err
	}
	defer srv.close()
	c := srv.client()
	defer c.close()
	ctx, cancel := context.WithTimeout(ctx, a.conn.timeout)
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
