package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync/internal/keys"
)

const listDoc = `list finds the locks of one kind under the prefix with SCAN MATCH
<prefix>:<kind>:* (which does not block the server) and prints those that
are held, sorted by name: holder, hold count, remaining lease and waiters.
Companion keys (:waiters, :fence, :queue, ...) and the keys of free locks
(a freed lock key keeps only the last fencing token, "<token> free") are
skipped.

With -json it prints a JSON array of objects with the fields of
'dsync inspect -json'.`

// scanCount is the COUNT hint of list's SCAN calls.
const scanCount = 1000

// freed matches the value of a freed lock key: only the last token.
var freed = regexp.MustCompile(`^[0-9]+ free$`)

// unescaper reverses the escaping of names in keys (see internal/keys).
var unescaper = strings.NewReplacer("%7B", "{", "%7D", "}", "%25", "%")

// globEscaper quotes the characters SCAN MATCH patterns treat specially.
var globEscaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`)

// lockName returns the name of the lock whose main key is key, or false if
// key is not one (a companion key has a suffix after the closing brace).
func lockName(key, base string) (string, bool) {
	rest, ok := strings.CutPrefix(key, base)
	if !ok || len(rest) < 3 || rest[0] != '{' {
		return "", false
	}
	// Braces in names are escaped, so the first closing brace ends the
	// name; a main key ends there.
	if end := strings.IndexByte(rest, '}'); end != len(rest)-1 {
		return "", false
	}
	return unescaper.Replace(rest[1 : len(rest)-1]), true
}

// list prints the held locks of one kind on a server.
func list(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "list", listDoc)
	var a adminFlags
	a.register(fs)
	asJSON := fs.Bool("json", false, "print a JSON array")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if err := a.check(); err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("unexpected arguments %q", pos)
	}
	if _, err := keys.Base(a.prefix, string(a.kind), "x"); err != nil {
		return usagef("%v", err)
	}

	srv, err := openServer(ctx, a.addr, a.timeout)
	if err != nil {
		return err
	}
	defer srv.close()
	c := srv.client()
	defer c.close()

	held, err := scanHeld(ctx, e, c, a)
	if err != nil {
		return err
	}
	slices.SortFunc(held, func(x, y lockState) int { return strings.Compare(x.Name, y.Name) })
	if *asJSON {
		if held == nil {
			held = []lockState{}
		}
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(held)
	}
	if len(held) == 0 {
		fmt.Fprintf(e.stderr, "no held %s under prefix %q\n", a.kind, a.prefix)
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	waiters := "WAITERS"
	if a.kind == kindFairlock {
		waiters = "QUEUED"
	}
	fmt.Fprintf(tw, "NAME\tHOLDER\tHOLDS\tTOKEN\tLEASE\t%s\n", waiters)
	for _, s := range held {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%d\n", printable(s.Name), printable(s.Holder), s.HoldCount, s.Token, describeLease(s), s.Waiters)
	}
	return tw.Flush()
}

// scanHeld walks the keyspace for the main keys of locks of a's kind and
// returns the state of those held. Each call to the server has its own
// timeout; the walk as a whole ends only with ctx.
func scanHeld(ctx context.Context, e *env, c *client, a adminFlags) ([]lockState, error) {
	base := a.prefix + ":" + string(a.kind) + ":"
	pattern := globEscaper.Replace(base) + "*"
	var held []lockState
	cursor := "0"
	for {
		reply, err := redis.Values(c.do(ctx, a.timeout, "SCAN", cursor, "MATCH", pattern, "COUNT", scanCount))
		if err != nil {
			return nil, fmt.Errorf("scan: %w", err)
		}
		if len(reply) != 2 {
			return nil, fmt.Errorf("scan: unexpected reply %v", reply)
		}
		if cursor, err = redis.String(reply[0], nil); err != nil {
			return nil, fmt.Errorf("scan: %w", err)
		}
		found, err := redis.Strings(reply[1], nil)
		if err != nil {
			return nil, fmt.Errorf("scan: %w", err)
		}
		var mains, names []string
		for _, k := range found {
			if name, ok := lockName(k, base); ok {
				mains, names = append(mains, k), append(names, name)
			}
		}
		if len(mains) > 0 {
			values, err := c.getAll(ctx, a.timeout, mains)
			if err != nil {
				return nil, err
			}
			for i, v := range values {
				if v == "" || freed.MatchString(v) {
					continue // vanished, not a string, or freed
				}
				sctx, cancel := context.WithTimeout(ctx, a.timeout)
				s, err := readState(sctx, c.b, string(a.kind), a.prefix, names[i])
				cancel()
				switch {
				case ctx.Err() != nil:
					return nil, ctx.Err()
				case err != nil:
					// Not a lock of this kind, or a name the library
					// refuses: say so and go on.
					fmt.Fprintf(e.stderr, "dsync list: skipping %s: %v\n", mains[i], err)
				case s.Locked:
					held = append(held, s)
				}
			}
		}
		if cursor == "0" {
			return held, nil
		}
	}
}

// getAll returns the string values of keys, pipelined in one round trip
// (GETs rather than MGET, so that keys of several hash slots are fine);
// "" for a key that is missing or holds another type.
func (c *client) getAll(ctx context.Context, timeout time.Duration, ks []string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := c.pool.GetContext(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	for _, k := range ks {
		if err := conn.Send("GET", k); err != nil {
			return nil, err
		}
	}
	if err := conn.Flush(); err != nil {
		return nil, err
	}
	values := make([]string, len(ks))
	for i := range ks {
		v, err := redis.String(redis.ReceiveContext(conn, ctx))
		var re redis.Error
		switch {
		case errors.Is(err, redis.ErrNil), errors.As(err, &re): // missing, WRONGTYPE
		case err != nil:
			return nil, fmt.Errorf("get: %w", err)
		default:
			values[i] = v
		}
	}
	return values, nil
}
