package rwlock_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"

	"github.com/dsyncgo/dsync/rwlock"
	"github.com/dsyncgo/dsync/tests/fake"
)

// scriptRun is how long each script is taken to have run before it reads
// the server's TIME (see lateTime).
const scriptRun = time.Millisecond

// lateTime makes srv answer TIME scriptRun late, in scripts too: as a
// server does whose script reads TIME after running scriptRun, while it
// counts the relative expiries the script sets (PEXPIRE, SET PX) from the
// script's start. Redis since 7.2 does so (it freezes a command's time at
// its start, a script's included), and so does the shared miniredis of
// the tests between the ticks of its TTLs. In the bubble of synctest no
// time passes during a script: TTLs count from time.Now().
func lateTime(t *testing.T, srv *miniredis.Miniredis) {
	// The in-memory server starts with its first connection.
	c, err := srv.Dial()
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	srv.Server().SetPreHook(func(c *server.Peer, cmd string, args ...string) bool {
		if cmd != "TIME" {
			return false
		}
		us := time.Now().Add(scriptRun).UnixMicro()
		c.WriteLen(2)
		c.WriteBulk(strconv.FormatInt(us/1e6, 10))
		c.WriteBulk(strconv.FormatInt(us%1e6, 10))
		return true
	})
}

// mainKeyOutlives fails t unless the lock's main key outlives every read
// hold and every waiter's entry on the lock, by their expiries: a main key
// gone says that nothing is on the lock (see rwlock/lua/rw.lua), and a plain
// SET NX may take it while a read hold or a waiter's turn still counts.
func mainKeyOutlives(t *testing.T, srv *miniredis.Miniredis, name, when string) {
	t.Helper()
	w := key("dsync", name)
	if !srv.Exists(w) {
		t.Errorf("%s: the main key is missing", when)
		return
	}
	v, _ := srv.Get(w)
	ends := time.Now().Add(srv.TTL(w))
	for _, k := range []string{w + ":rexpiry", w + ":wexpiry", w + ":rwait"} {
		if !srv.Exists(k) {
			continue
		}
		members, err := srv.ZMembers(k)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range members {
			score, err := srv.ZScore(k, m)
			if err != nil {
				t.Fatal(err)
			}
			if at := time.UnixMilli(int64(score)); at.After(ends) {
				t.Errorf("%s: the main key (%q) expires %v before the entry %s of %s: for that long the lock reads as free under it",
					when, v, at.Sub(ends), m, k[len(w):])
			}
		}
	}
}

// TestSharedKeyOutlivesReaders: the main key W in its shared form ("<token>
// shared", rw.lua) must expire no sooner than any read hold or waiter's
// entry. Its expiry was set relative (PEXPIRE, SET PX, KEEPTTL of a TTL
// read by PTTL), while the expiries in the sorted sets are absolute, from
// the script's TIME: on a server that counts a script's relative expiries
// from its start, W expired up to the script's run before the entries it
// was kept for, as the write hold's key would without its turn margin
// (exclusive.lua). Each script below left W short by scriptRun: the
// acquisition that moves a lone reader's hold out of W (rw_unfold), one
// that adds a read hold or a waiter (rw_keep), the read holds' renewal
// (renew_read.lua), and the hand-off that writes W back (rw_settle).
func TestSharedKeyOutlivesReaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		lateTime(t, srv)
		ctx := context.Background()
		const name = "outlives"
		open := func(opts ...rwlock.Option) *rwlock.RWMutex {
			return rwlock.New(fake.FakeBackend(t, srv), name, append(opts, rwlock.WithLogger(nil))...)
		}
		// Reader a's lease is the longer one: b's acquisition, which moves
		// a's hold out of W, does not push W back past it.
		a := open(rwlock.WithWatchdog(900 * time.Millisecond))
		b := open(rwlock.WithWatchdog(600 * time.Millisecond))
		if err := a.RLockContext(ctx); err != nil {
			t.Fatal(err)
		}
		if err := b.RLockContext(ctx); err != nil {
			t.Fatal(err)
		}
		mainKeyOutlives(t, srv, name, "two readers")

		// Both renewed once at least (every third of their leases).
		time.Sleep(350 * time.Millisecond)
		synctest.Wait()
		mainKeyOutlives(t, srv, name, "two readers renewed")

		var wg sync.WaitGroup
		wg.Go(func() {
			w := open()
			if err := w.LockContext(ctx); err != nil {
				t.Errorf("writer: %v", err)
				return
			}
			if err := w.UnlockContext(ctx); err != nil {
				t.Errorf("writer's Unlock: %v", err)
			}
		})
		synctest.Wait()
		mainKeyOutlives(t, srv, name, "a writer waiting")

		in, out := make(chan struct{}), make(chan struct{})
		wg.Go(func() {
			c := open()
			if err := c.RLockContext(ctx); err != nil {
				t.Errorf("reader c: %v", err)
				close(in)
				return
			}
			close(in)
			<-out
			if err := c.RUnlockContext(ctx); err != nil {
				t.Errorf("reader c's RUnlock: %v", err)
			}
		})
		synctest.Wait()
		mainKeyOutlives(t, srv, name, "a writer and a reader waiting")

		// The last read release hands the lock to the writer, whose
		// release hands it to reader c.
		if err := a.RUnlockContext(ctx); err != nil {
			t.Fatal(err)
		}
		if err := b.RUnlockContext(ctx); err != nil {
			t.Fatal(err)
		}
		<-in
		synctest.Wait()
		mainKeyOutlives(t, srv, name, "reader c handed the lock after the writer")
		close(out)
		wg.Wait()
	})
}
