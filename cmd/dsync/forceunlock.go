package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/fairlock"
	"github.com/dsyncgo/dsync/internal/keys"
	"github.com/dsyncgo/dsync/mutex"
)

const forceUnlockDoc = `force-unlock takes the lock called name from whoever holds it, however
many times, and hands it to the next waiter, as a release would. The
holder learns of the loss at its next renewal (its Done channel closes)
and should stop touching the protected resource; a holder that does not
check is fenced off only by its fencing token. Use it to recover from a
holder known to be dead whose lease is too long to wait out.

Unless -yes is given it asks "force-unlock mutex NAME held by OWNER? [y/N]"
on standard error and reads the answer from standard input; anything but
y or yes leaves the lock alone and exits with status 1, as does a holder
that changed while it asked. A lock that is not held is left alone, with
status 0. Flags may follow the name.`

// errNotConfirmed is the answer no to force-unlock's question.
var errNotConfirmed = errors.New("not confirmed; the lock was left alone")

// forceUnlock frees a lock whoever holds it.
func forceUnlock(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "force-unlock", forceUnlockDoc)
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

	srv, err := openServer(ctx, a.addr, a.timeout)
	if err != nil {
		return err
	}
	defer srv.close()
	c := srv.client()
	defer c.close()
	state := func() (lockState, error) {
		ctx, cancel := context.WithTimeout(ctx, a.timeout)
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
		fmt.Fprintf(e.stderr, "force-unlock %s %q held by %s? [y/N] ", kind, name, printable(s.Holder))
		ok, err := confirm(ctx, e.stdin)
		if err != nil {
			return err
		}
		if !ok {
			return errNotConfirmed
		}
		// The question may have taken a while: unlock only the holder
		// that was named.
		now, err := state()
		if err != nil {
			return err
		}
		if !now.Locked {
			fmt.Fprintf(e.stdout, "%s %q was released meanwhile; nothing to do\n", kind, name)
			return nil
		}
		if now.Holder != s.Holder || now.Token != s.Token {
			return fmt.Errorf("%s %q changed hands while asking (now held by %s, token %d); left alone", kind, name, printable(now.Holder), now.Token)
		}
	}

	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.timeout)
	defer cancel()
	// Only the hold that was named, by its fencing token: one taken since
	// is left alone.
	was, err := forceUnlockLock(fctx, c.b, kind, a.prefix, name, s.Token)
	if err != nil {
		return err
	}
	if !was {
		now, err := state()
		if err != nil {
			return err
		}
		if now.Locked {
			return fmt.Errorf("%s %q changed hands: held by %s (token %d) when read, now by %s (token %d); left alone",
				kind, name, printable(s.Holder), s.Token, printable(now.Holder), now.Token)
		}
		fmt.Fprintf(e.stdout, "%s %q was released meanwhile; nothing to do\n", kind, name)
		return nil
	}
	fmt.Fprintf(e.stdout, "%s %q force-unlocked: it was held by %s (hold count %d, token %d); the holder learns of it at its next renewal\n",
		kind, name, printable(s.Holder), s.HoldCount, s.Token)
	return nil
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

// forceUnlockLock force-unlocks the hold with the given fencing token of
// the lock of the given kind and name, and reports whether it took it.
func forceUnlockLock(ctx context.Context, b backend.Backend, kind, prefix, name string, token int64) (bool, error) {
	if kind == kindFairlock {
		return fairlock.New(b, name, fairlock.WithPrefix(prefix)).ForceUnlockToken(ctx, token)
	}
	return mutex.New(b, name, mutex.WithPrefix(prefix)).ForceUnlockToken(ctx, token)
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
