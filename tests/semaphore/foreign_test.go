package semaphore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/semaphore"
)

// The semaphore's keys overwritten by something else while permits are
// held and a waiter is queued: no panic, no hang. The waiter's Acquire
// fails (ErrUnexpectedReply) by its next heartbeat, the holder's Done
// closes by its next renewal, its Release, State and SetCapacity report
// errors, and the foreign value is left as it is.
func TestKeyOverwrittenMidLife(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range []struct {
		suffix string
		cmd    []any // after DEL of the key
		typ    string
	}{
		{"", []any{"SET", "hello"}, "string"},
		{"", []any{"HSET", "cap", "many"}, "hash"},
		{"", []any{"HSET", "foo", "bar"}, "hash"},
		{":holders", []any{"SET", "x"}, "string"},
		{":capacity", []any{"SET", "lots"}, "string"},
	} {
		name := "midlife-" + dsync.NewID()[:8]
		key := "dsync:semaphore:{" + name + "}" + c.suffix
		opts := []semaphore.Option{semaphore.WithWatchdog(300 * time.Millisecond), semaphore.WithWaiterTimeout(600 * time.Millisecond), semaphore.WithLogger(nil)}
		holder := semaphore.New(srv.NewBackend(t), name, 2, opts...)
		w := semaphore.New(srv.NewBackend(t), name, 2, opts...)
		o := dsync.WithOwner(ctx)
		if err := holder.Acquire(o, 2); err != nil {
			t.Fatal(err)
		}
		done := holder.Done(o)
		got := acquire(ctx, w, 1)
		awaitState(t, ctx, holder, "w queued", func(st semaphore.State) bool { return st.Queued == 1 })
		if _, err := srv.Do(ctx, "DEL", key); err != nil {
			t.Fatal(err)
		}
		if _, err := srv.Do(ctx, c.cmd[0].(string), append([]any{key}, c.cmd[1:]...)...); err != nil {
			t.Fatal(err)
		}
		what := c.cmd[0].(string) + " " + key
		select {
		case err := <-got:
			if !errors.Is(err, dsync.ErrUnexpectedReply) {
				// A state that lost its holders (":holders" replaced) may
				// still serve the waiter if its scripts tolerate it; it
				// must not be a success over a foreign value, though.
				t.Errorf("%s: the waiter's Acquire = %v; want ErrUnexpectedReply", what, err)
				if err == nil {
					w.Release(ctx, 1)
				}
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("%s: the waiter still waiting 3s later (heartbeat 200ms)", what)
		}
		if c.suffix != ":capacity" {
			select {
			case <-done:
			case <-time.After(3 * time.Second):
				t.Errorf("%s: the holder's Done still open 3s later (renewals every 100ms)", what)
			}
		}
		start := time.Now()
		err := holder.Release(o, 2)
		if err == nil {
			t.Errorf("%s: the holder's Release succeeded", what)
		}
		if d := time.Since(start); d > 6*time.Second {
			t.Errorf("%s: Release took %v", what, d)
		}
		if _, err := holder.State(ctx); err == nil && c.suffix != ":holders" {
			t.Errorf("%s: State succeeded", what)
		}
		if err := holder.SetCapacity(ctx, 3); err == nil {
			t.Errorf("%s: SetCapacity succeeded", what)
		}
		if typ, _ := srv.Do(ctx, "TYPE", key); typ != c.typ {
			t.Errorf("%s: the key is now a %v", what, typ)
		}
		srv.Do(ctx, "DEL", key, "dsync:semaphore:{"+name+"}", "dsync:semaphore:{"+name+"}:holders",
			"dsync:semaphore:{"+name+"}:queue", "dsync:semaphore:{"+name+"}:expiry", "dsync:semaphore:{"+name+"}:capacity")
	}
}

// A key of the semaphore holding something dsync did not write is
// reported as ErrUnexpectedReply by the first call that reads it, and left
// as it is. A foreign value at the state key fails the first Acquire. One
// at a companion key (holders, queue, capacity) with no state there does
// not: a lone holder's Acquire is a plain SET NX of the state key, which
// touches no companion (a missing state says none is in use), and its
// Release compares and deletes that key alone. A second owner's Acquire,
// which the script serves, reads them, and fails; so does State once the
// holder is gone, but for the queue, which only waiters read.
func TestForeignKeys(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range []struct{ suffix, cmd, arg string }{
		{"", "SET", "hello"},
		{"", "HSET", "field"},
		{":holders", "LPUSH", "x"},
		{":capacity", "SET", "many"},
		{":queue", "SET", "x"},
	} {
		name := "foreign-" + dsync.NewID()[:8]
		key := "dsync:semaphore:{" + name + "}" + c.suffix
		args := []any{key, c.arg}
		if c.cmd == "HSET" {
			args = append(args, "v")
		}
		if _, err := srv.Do(ctx, c.cmd, args...); err != nil {
			t.Fatal(err)
		}
		sem := semaphore.New(srv.NewBackend(t), name, 2, semaphore.WithLogger(nil))
		wctx, wcancel := context.WithTimeout(ctx, time.Second)
		err := sem.Acquire(wctx, 1)
		wcancel()
		if c.suffix != "" {
			// The plain SET NX: the foreign companion is not read.
			if err != nil {
				t.Errorf("%s %s: a lone holder's Acquire = %v; want a plain SET NX, which reads no companion", c.cmd, key, err)
			}
			other := semaphore.New(srv.NewBackend(t), name, 2, semaphore.WithLogger(nil))
			wctx, wcancel := context.WithTimeout(ctx, time.Second)
			err = other.Acquire(wctx, 1)
			wcancel()
			if err == nil {
				other.Release(ctx, 1)
			}
		}
		if !errors.Is(err, dsync.ErrUnexpectedReply) {
			t.Errorf("%s %s: Acquire = %v; want ErrUnexpectedReply", c.cmd, key, err)
		}
		if c.suffix != "" {
			if err := sem.Release(ctx, 1); err != nil {
				t.Errorf("%s %s: the lone holder's Release = %v", c.cmd, key, err)
			}
		}
		if c.suffix != ":queue" { // the queue is read only by waiters
			if _, err := sem.State(ctx); !errors.Is(err, dsync.ErrUnexpectedReply) {
				t.Errorf("%s %s: State = %v; want ErrUnexpectedReply", c.cmd, key, err)
			}
		}
		typ, _ := srv.Do(ctx, "TYPE", key)
		if want := map[string]string{"SET": "string", "HSET": "hash", "LPUSH": "list"}[c.cmd]; typ != want {
			t.Errorf("%s %s: the key is now a %v", c.cmd, key, typ)
		}
		srv.Do(ctx, "DEL", key, "dsync:semaphore:{"+name+"}", "dsync:semaphore:{"+name+"}:holders")
	}
}
