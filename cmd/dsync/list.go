package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dsyncgo/dsync/internal/keys"
)

const listDoc = `list finds the locks of one kind (-kind, mutex by default) under the
prefix with SCAN MATCH <prefix>:<kind>:* (which does not block the server)
and prints those that are held, sorted by name: for a mutex or a fair
lock, the holder, hold count, fencing token, remaining lease and waiters;
for a read-write lock, the mode, the writer and its hold, the readers and
the waiting writers and readers; for a semaphore, the capacity, the
permits held and available, the holders and the waiters; for an
election, the leader's value, its token, its remaining lease and the
candidates queued; for a wait group, its count, its owners, the first
abandonment and the waiters. Companion keys (:queue, :fence, :readers,
...) and the markers of free locks ("<token> free": a mutex freed while a
waiter was woken to take it) are skipped; a read-write lock held only by
readers is found by its :readers key.

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

// splitKey returns the name of the lock whose key is key, and the suffix
// of a companion key ("" for the main key), or false if key is not one of
// base's.
func splitKey(key, base string) (name, suffix string, ok bool) {
	rest, ok := strings.CutPrefix(key, base)
	if !ok || len(rest) < 3 || rest[0] != '{' {
		return "", "", false
	}
	// Braces in names are escaped, so the first closing brace ends the
	// name.
	end := strings.IndexByte(rest, '}')
	if end < 2 {
		return "", "", false
	}
	return unescaper.Replace(rest[1:end]), rest[end+1:], true
}

// lockName returns the name of the lock whose main key is key, or false if
// key is not one.
func lockName(key, base string) (string, bool) {
	name, suffix, ok := splitKey(key, base)
	if !ok || suffix != "" {
		return "", false
	}
	return name, true
}

// heldKeys returns the suffixes of the keys whose presence may mean that a
// lock of kind is held: its main key, and for a read-write lock, which a
// reader holds without a main key, the hash of read holds.
func heldKeys(kind string) []string {
	if kind == kindRWLock {
		return []string{"", ":readers"}
	}
	return []string{""}
}

// freeable reports whether a lock of kind keeps its main key, a string,
// once free: its value then tells a free lock without a look at its state.
func freeable(kind string) bool { return kind != kindSemaphore && kind != kindWaitGroup }

// list prints the held locks of one kind on a server.
func list(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "list", listDoc+"\n\n"+connUsage(true))
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

	srv, err := openServer(ctx, e, &a.conn)
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
	writeTable(tw, string(a.kind), held)
	return tw.Flush()
}

// writeTable prints held, locks of kind, as a table.
func writeTable(tw io.Writer, kind string, held []lockState) {
	switch kind {
	case kindRWLock:
		fmt.Fprintf(tw, "NAME\tMODE\tWRITER\tHOLDS\tTOKEN\tLEASE\tREADERS\tWAITING W\tWAITING R\n")
		for _, s := range held {
			writer, lease := "-", "-"
			if s.Holder != "" {
				writer, lease = printable(s.Holder), describeLease(s)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%d\t%d\t%d\n", printable(s.Name), s.Mode, writer, s.HoldCount, s.Token, lease,
				s.Readers, s.WaitingWriters, s.WaitingReaders)
		}
	case kindElection:
		fmt.Fprintf(tw, "NAME\tLEADER\tTOKEN\tLEASE\tCANDIDATES\n")
		for _, s := range held {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\n", printable(s.Name), printable(s.Value), s.Token, describeLease(s), s.Waiters)
		}
	case kindWaitGroup:
		writeWaitGroupTable(tw, held)
	case kindSemaphore:
		fmt.Fprintf(tw, "NAME\tCAPACITY\tHELD\tAVAILABLE\tHOLDERS\tQUEUED\n")
		for _, s := range held {
			capacity := fmt.Sprint(s.Capacity)
			if s.CapacitySet {
				capacity += " (set)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\n", printable(s.Name), capacity, s.Held, s.Available, s.Holders, s.Waiters)
		}
	default:
		waiters := "WAITERS"
		if kind == kindFairlock {
			waiters = "QUEUED"
		}
		fmt.Fprintf(tw, "NAME\tHOLDER\tHOLDS\tTOKEN\tLEASE\t%s\n", waiters)
		for _, s := range held {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%d\n", printable(s.Name), printable(s.Holder), s.HoldCount, s.Token, describeLease(s), s.Waiters)
		}
	}
}

// scanHeld walks the keyspace for the keys of locks of a's kind and
// returns the state of those held. Each call to the server has its own
// timeout; the walk as a whole ends only with ctx.
func scanHeld(ctx context.Context, e *env, c *client, a adminFlags) ([]lockState, error) {
	kind := string(a.kind)
	base := a.prefix + ":" + kind + ":"
	pattern := globEscaper.Replace(base) + "*"
	var held []lockState
	seen := map[string]bool{} // names whose state was read
	scan, err := c.scanner(ctx, pattern, a.conn.timeout)
	if err != nil {
		return nil, fmt.Errorf("scan: %w", err)
	}
	for {
		found, more, err := scan(ctx)
		if err != nil {
			return nil, fmt.Errorf("scan: %w", err)
		}
		names, err := candidates(ctx, c, a, found, base)
		if err != nil {
			return nil, err
		}
		for _, name := range names {
			if seen[name] {
				continue // SCAN may return a key twice; rwlock has two
			}
			seen[name] = true
			sctx, cancel := context.WithTimeout(ctx, a.conn.timeout)
			s, err := readState(sctx, c.b, kind, a.prefix, name)
			cancel()
			switch {
			case ctx.Err() != nil:
				return nil, ctx.Err()
			case err != nil:
				// Not a lock of this kind, or a name the library
				// refuses: say so and go on.
				key, _ := keys.Base(a.prefix, kind, name)
				fmt.Fprintf(e.stderr, "dsync list: skipping %s: %v\n", printable(key), err)
			case s.Locked:
				held = append(held, s)
			}
		}
		if !more {
			return held, nil
		}
	}
}

// candidates returns the names of the locks whose keys, among found, may
// mean that they are held: main keys of a kind that keeps them once free
// are read first, in one round trip, and skipped if they say free.
func candidates(ctx context.Context, c *client, a adminFlags, found []string, base string) ([]string, error) {
	kind := string(a.kind)
	var names, mains, mainNames []string
	for _, k := range found {
		name, suffix, ok := splitKey(k, base)
		if !ok || !slices.Contains(heldKeys(kind), suffix) {
			continue
		}
		if suffix == "" && freeable(kind) {
			mains, mainNames = append(mains, k), append(mainNames, name)
			continue
		}
		names = append(names, name)
	}
	if len(mains) == 0 {
		return names, nil
	}
	values, err := c.getAll(ctx, a.conn.timeout, mains)
	if err != nil {
		return nil, err
	}
	for i, v := range values {
		if v != "" && !freed.MatchString(v) {
			names = append(names, mainNames[i])
		}
	}
	return names, nil
}

// scanner returns a function that walks the keys matching pattern with
// SCAN, on every primary of a cluster in turn: each call returns the next
// keys found, and whether more calls may find more. Each call to the
// server is bounded by timeout.
func (c *client) scanner(ctx context.Context, pattern string, timeout time.Duration) (func(context.Context) ([]string, bool, error), error) {
	nodes, err := c.nodes(ctx)
	if err == nil && len(nodes) == 0 {
		err = errors.New("the cluster has no primary")
	}
	if err != nil {
		return nil, err
	}
	var cursor uint64
	return func(ctx context.Context) ([]string, bool, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		found, next, err := nodes[0].Scan(ctx, cursor, pattern, scanCount).Result()
		if err != nil {
			return nil, false, err
		}
		if cursor = next; cursor == 0 {
			nodes = nodes[1:]
		}
		return found, len(nodes) > 0, nil
	}, nil
}

// getAll returns the string values of keys, pipelined in one round trip
// per node (GETs rather than MGET, so that keys of several hash slots are
// fine); "" for a key that is missing or holds another type.
func (c *client) getAll(ctx context.Context, timeout time.Duration, ks []string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pipe := c.rc.Pipeline()
	cmds := make([]*redis.StringCmd, len(ks))
	for i, k := range ks {
		cmds[i] = pipe.Get(ctx, k)
	}
	pipe.Exec(ctx) // each command's error is its own
	values := make([]string, len(ks))
	for i, cmd := range cmds {
		v, err := cmd.Result()
		var re redis.Error
		switch {
		case errors.Is(err, redis.Nil), errors.As(err, &re): // missing, WRONGTYPE
		case err != nil:
			return nil, fmt.Errorf("get: %w", err)
		default:
			values[i] = v
		}
	}
	return values, nil
}
