package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/fairlock"
	"github.com/dsyncgo/dsync/internal/keys"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/rwlock"
)

const forceUnlockDoc = `force-unlock takes the lock of the given kind (-kind, mutex by default)
called name from whoever holds it, however many times, and passes it on
as a release would. Use it to recover from a holder known to be dead
whose lease is too long to wait out. The holders learn of the loss at
their next renewal (their Done channel closes) and should stop touching
the protected resource; a holder that does not check is fenced off only
by its fencing token.

What it takes, by kind:
  mutex, fairlock  the hold read before, and only that one (by its
                   fencing token): a hold taken since is left alone; the
                   next waiter gets the lock at once
  election         the term read before, and only that one (by its
                   fencing token); the next candidate leads at once
  rwlock           every hold, write and read, found when it runs; the
                   waiting writer or readers get the lock at once
  semaphore        every permit of every holder found when it runs (the
                   holders' leases are deleted, or a lone holder's state;
                   the queue and runtime capacity are kept); the waiters
                   queued get the permits at their next attempt, within a
                   third of their waiter timeout (under 2s by default)
For a read-write lock and a semaphore a hold taken between the check and
the force (one round trip) is taken too.
A wait group has no holder to take: force-unlock refuses it.

Unless -yes is given it asks, on standard error, for example
"force-unlock mutex NAME held by OWNER? [y/N]", and reads the answer from
standard input; anything but y or yes leaves the lock alone and exits
with status 1, as does a lock whose holders changed while it asked. A
lock that is not held is left alone, with status 0. Flags may follow the
name.`

// errNotConfirmed is the answer no to force-unlock's question.
var errNotConfirmed = errors.New("not confirmed; the lock was left alone")

// forceUnlock frees a lock whoever holds it.
func forceUnlock(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "force-unlock", forceUnlockDoc+"\n\n"+connUsage(true))
	var a adminFlags
	a.register(fs)
	yes := fs.Bool("yes", false, "do not ask for confirmation")
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
	name, kind := pos[0], string(a.kind)
	if _, err := keys.Base(a.prefix, kind, name); err != nil {
		return usagef("%v", err)
	}
	if kind == kindWaitGroup {
		return usagef("a wait group has nothing to force: its waiters wait for its count, not for a holder")
	}

	srv, err := openServer(ctx, e, &a.conn)
	if err != nil {
		return err
	}
	defer srv.close()
	c := srv.client()
	defer c.close()
	state := func() (lockState, error) {
		ctx, cancel := context.WithTimeout(ctx, a.conn.timeout)
		defer cancel()
		return readState(ctx, c.b, kind, a.prefix, name)
	}

	s, err := state()
	if err != nil {
		return err
	}
	if !s.Locked {
		fmt.Fprintf(e.stdout, "%s %q is not locked; nothing to do\n", kind, name)
		return nil
	}
	if !*yes {
		fmt.Fprintf(e.stderr, "force-unlock %s %q %s? [y/N] ", kind, name, describeHolders(s))
		ok, err := confirm(ctx, e.stdin)
		if err != nil {
			return err
		}
		if !ok {
			return errNotConfirmed
		}
		// The question may have taken a while: unlock only the holders
		// that were named.
		now, err := state()
		if err != nil {
			return err
		}
		if !now.Locked {
			fmt.Fprintf(e.stdout, "%s %q was released meanwhile; nothing to do\n", kind, name)
			return nil
		}
		if !sameHolders(s, now) {
			return fmt.Errorf("%s %q changed hands while asking (now %s); left alone", kind, name, describeHold(now))
		}
	}

	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.conn.timeout)
	defer cancel()
	was, err := forceUnlockLock(fctx, c, a, s)
	if err != nil {
		return err
	}
	if !was {
		now, err := state()
		if err != nil {
			return err
		}
		if now.Locked {
			return fmt.Errorf("%s %q changed hands: %s when read, now %s; left alone",
				kind, name, describeHold(s), describeHold(now))
		}
		fmt.Fprintf(e.stdout, "%s %q was released meanwhile; nothing to do\n", kind, name)
		return nil
	}
	fmt.Fprintf(e.stdout, "%s %q force-unlocked: it was %s; the holders learn of it at their next renewal\n",
		kind, name, describeHold(s))
	return nil
}

// describeHolders says who holds the lock s, for force-unlock's question.
func describeHolders(s lockState) string {
	switch {
	case s.Kind == kindSemaphore:
		return fmt.Sprintf("held by %s, %s in all", plural(s.Holders, "owner"), plural(int(s.Held), "permit"))
	case s.Holder == "" && s.Kind == kindRWLock:
		return "read-held by " + plural(s.Readers, "owner")
	case s.Kind == kindElection:
		return fmt.Sprintf("led by %s (owner %s)", printable(s.Value), printable(s.Holder))
	}
	return "held by " + printable(s.Holder)
}

// describeHold is describeHolders with the hold count and token of an
// exclusive hold.
func describeHold(s lockState) string {
	if s.Exclusive == nil || s.Holder == "" {
		return describeHolders(s)
	}
	return fmt.Sprintf("%s (hold count %d, token %d)", describeHolders(s), s.HoldCount, s.Token)
}

// sameHolders reports whether the holders of a lock seem unchanged from
// was to now: the same hold, by its fencing token, for a lock with an
// exclusive one; as many readers or permits and holders otherwise, as
// far as State tells them apart.
func sameHolders(was, now lockState) bool {
	switch {
	case was.Kind == kindSemaphore:
		return now.Held == was.Held && now.Holders == was.Holders
	case was.Kind == kindRWLock && was.Holder == "":
		return now.Holder == "" && now.Readers == was.Readers
	}
	return now.Holder == was.Holder && now.Token == was.Token
}

// confirm reads one line from in and reports whether it says yes. It
// gives up when ctx ends (the reading goroutine then stays blocked until
// in yields a line or ends, as reads of a terminal cannot be cancelled).
func confirm(ctx context.Context, in io.Reader) (bool, error) {
	type answer struct {
		line string
		err  error
	}
	ch := make(chan answer, 1)
	go func() {
		line, err := bufio.NewReader(in).ReadString('\n')
		ch <- answer{line, err}
	}()
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case a := <-ch:
		if a.err != nil && a.err != io.EOF {
			return false, fmt.Errorf("read answer: %w", a.err)
		}
		switch strings.ToLower(strings.TrimSpace(a.line)) {
		case "y", "yes":
			return true, nil
		}
		return false, nil
	}
}

// forceUnlockLock force-unlocks the lock s (see forceUnlockDoc for what
// each kind takes) and reports whether it took anything.
func forceUnlockLock(ctx context.Context, c *client, a adminFlags, s lockState) (bool, error) {
	prefix := a.prefix
	switch s.Kind {
	case kindFairlock:
		return fairlock.New(c.b, s.Name, fairlock.WithPrefix(prefix)).ForceUnlockToken(ctx, s.Token)
	case kindRWLock:
		return rwlock.New(c.b, s.Name, rwlock.WithPrefix(prefix)).ForceUnlock(ctx)
	case kindSemaphore:
		return forceReleaseSemaphore(ctx, c, a.conn.timeout, s.Key)
	case kindElection:
		return election.New(c.b, s.Name, election.WithPrefix(prefix)).ForceResignToken(ctx, s.Token)
	}
	return mutex.New(c.b, s.Name, mutex.WithPrefix(prefix)).ForceUnlockToken(ctx, s.Token)
}

// forceReleaseScript ends every permit of a semaphore, as package
// semaphore documents its keys: a lone holder's state (a string, which
// nobody waits behind) is deleted; a shared state (a hash) loses its
// holders key, the leases, which ends every permit it counts as leases
// that ran out would, and stays while waiters are queued or a capacity is
// set at runtime, as the semaphore's plain acquisition requires.
// KEYS[1] the state, KEYS[2] holders. Reply: the number of keys deleted.
var forceReleaseScript = backend.NewScript(`if redis.call('TYPE', KEYS[1]).ok == 'string' then
  return redis.call('DEL', KEYS[1])
end
return redis.call('DEL', KEYS[2])`)

// forceReleaseSemaphore ends every permit of the semaphore whose main key
// is key (see forceReleaseScript), which is what a semaphore whose holders
// all died comes to when their leases end. Package semaphore has no force
// release; its holders treat a lost lease as a loss (Done), and its
// waiters, whose queue is kept, take the permits at their next attempt.
func forceReleaseSemaphore(ctx context.Context, c *client, timeout time.Duration, key string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	reply, err := c.b.Eval(ctx, forceReleaseScript, []string{key, key + ":holders"})
	if err != nil {
		return false, fmt.Errorf("end the permits of semaphore at %s: %w", printable(key), err)
	}
	n, err := backend.Int(reply)
	if err != nil {
		return false, fmt.Errorf("end the permits of semaphore at %s: %w", printable(key), err)
	}
	return n > 0, nil
}

// plural returns n and noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// printable returns s as is if every byte of it prints harmlessly, and
// quoted otherwise: owner ids and names come from the server, and anyone
// who can write to it could put terminal escapes there.
func printable(s string) string {
	for _, r := range s {
		if !unicode.IsPrint(r) || r == utf8.RuneError {
			return strconv.Quote(s)
		}
	}
	return s
}
