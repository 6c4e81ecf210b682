package rwlock_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/rwlock"
	"github.com/dsyncgo/dsync/tests/fake"
)

// TestHandedTokenAboveEarlierTokens: the fence key keeps the
// last token drawn, so that a server clock that steps back (a server whose
// clock ran fast is corrected) does not lower the tokens of the holds
// after it, whoever draws them: a write hold taken directly ("direct"), a
// writer handed the lock by a release ("handed writer"), or readers handed
// it, after which a write hold is taken directly ("handed readers").
// Every write hold takes the next token of one sequence per name, above
// that of every hold before it (doc.go). With the fence key lost too, the
// next token is seeded from the clock (fence.lua): that case is the
// documented limit, and not tested here.
func TestHandedTokenAboveEarlierTokens(t *testing.T) {
	for _, how := range []string{"direct", "handed writer", "handed readers"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := fake.Fake(t)
				ctx := context.Background()
				open := func() *rwlock.RWMutex {
					return rwlock.New(fake.FakeBackend(t, srv), "tok", rwlock.WithLogger(nil))
				}
				x, y := open(), open()
				o := dsync.WithOwner(ctx)
				// The server's clock runs an hour fast when the lock is first
				// used: tokens are seeded from it.
				srv.SetTime(time.Now().Add(time.Hour))
				if err := x.LockContext(o); err != nil {
					t.Fatal(err)
				}
				first, _ := x.Token(o)
				x.UnlockContext(o)
				// The clock is corrected: it steps back an hour.
				srv.SetTime(time.Now())
				if err := x.LockContext(o); err != nil {
					t.Fatal(err)
				}
				prev, _ := x.Token(o)
				if prev <= first {
					t.Fatalf("with both copies of the last token present, the second write token %d is not above the first %d", prev, first)
				}
				var next int64
				switch how {
				case "direct":
					x.UnlockContext(o)
					if err := x.LockContext(o); err != nil {
						t.Fatal(err)
					}
					next, _ = x.Token(o)
					x.UnlockContext(o)
				case "handed writer":
					oy := dsync.WithOwner(ctx)
					got := make(chan error, 1)
					go func() { got <- y.LockContext(oy) }()
					synctest.Wait()
					x.UnlockContext(o) // hands the lock to y
					if err := <-got; err != nil {
						t.Fatal(err)
					}
					next, _ = y.Token(oy)
					y.UnlockContext(oy)
				case "handed readers":
					got := make(chan error, 3)
					for range 3 {
						go func() { got <- y.RLockContext(ctx) }()
					}
					synctest.Wait()
					x.UnlockContext(o) // hands the lock to the 3 readers
					for range 3 {
						if err := <-got; err != nil {
							t.Fatal(err)
						}
					}
					for range 3 {
						y.RUnlock()
					}
					if err := x.LockContext(o); err != nil {
						t.Fatal(err)
					}
					next, _ = x.Token(o)
					x.UnlockContext(o)
				}
				if next <= prev {
					t.Errorf("%s: after the clock stepped back the next write token is %d, not above the previous write hold's %d", how, next, prev)
				}
				time.Sleep(time.Minute)
			})
		})
	}
}

// TestTokenMixReal: on a real server (a clock that does not step
// back), write tokens strictly increase, above every token seen before,
// across handed and direct reads, handed and direct writes, fence key loss
// and write key loss while free (and both), ForceUnlock, and a restart
// without persistence.
func TestTokenMixReal(t *testing.T) {
	srv := testserver.Real(t)
	ctx := context.Background()
	p := prefix(t)
	open := func() *rwlock.RWMutex {
		return rwlock.New(srv.NewBackend(t), "tm", rwlock.WithPrefix(p), rwlock.WithLogger(nil))
	}
	w, r, y, probe := open(), open(), open(), open()
	var highest int64
	see := func(what string) {
		t.Helper()
		if st, err := probe.State(ctx); err == nil && st.Token > highest {
			highest = st.Token
		}
	}
	write := func(what string, m *rwlock.RWMutex, o context.Context) {
		t.Helper()
		tok, err := m.Token(o)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if tok <= highest {
			t.Errorf("%s: write token %d, not above %d seen before", what, tok, highest)
		}
		highest = max(highest, tok)
	}
	o := dsync.WithOwner(ctx)
	direct := func(what string) {
		t.Helper()
		if err := w.LockContext(o); err != nil {
			t.Fatal(err)
		}
		write(what, w, o)
		w.UnlockContext(o)
	}
	handedReaders := func(what string, lose ...string) {
		t.Helper()
		if err := w.LockContext(o); err != nil {
			t.Fatal(err)
		}
		write(what+" (the releasing writer)", w, o)
		got := make(chan error, 3)
		for range 3 {
			go func() { got <- r.RLockContext(ctx) }()
		}
		await(t, ctx, probe, "readers waiting", func(s rwlock.State) bool { return s.WaitingReaders == 3 })
		for _, k := range lose {
			srv.Do(ctx, "DEL", key(p, "tm")+k)
		}
		w.UnlockContext(o)
		for range 3 {
			if err := <-got; err != nil {
				t.Fatal(err)
			}
		}
		see(what)
		for range 3 {
			r.RUnlock()
		}
	}
	handedWriter := func(what string, lose ...string) {
		t.Helper()
		if err := w.LockContext(o); err != nil {
			t.Fatal(err)
		}
		write(what+" (the releasing writer)", w, o)
		oy := dsync.WithOwner(ctx)
		got := make(chan error, 1)
		go func() { got <- y.LockContext(oy) }()
		await(t, ctx, probe, "writer queued", func(s rwlock.State) bool { return s.WaitingWriters == 1 })
		for _, k := range lose {
			srv.Do(ctx, "DEL", key(p, "tm")+k)
		}
		if lose != nil && lose[0] == "force" {
			if took, err := probe.ForceUnlock(ctx); !took || err != nil {
				t.Fatalf("ForceUnlock: %v, %v", took, err)
			}
		} else {
			w.UnlockContext(o)
		}
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		write(what, y, oy)
		y.UnlockContext(oy)
	}
	direct("first write")
	handedReaders("handed readers")
	r.RLock()
	see("direct read")
	r.RUnlock()
	direct("write after reads")
	handedWriter("handed writer")
	srv.Do(ctx, "DEL", key(p, "tm")+":fence")
	direct("write after the fence key was lost while free")
	srv.Do(ctx, "DEL", key(p, "tm"))
	direct("write after the write key was lost while free")
	r.RLock()
	srv.Do(ctx, "DEL", key(p, "tm")+":fence")
	r.RUnlock()
	direct("write after the fence key was lost under a read hold")
	srv.Do(ctx, "DEL", key(p, "tm"), key(p, "tm")+":fence")
	direct("write after both were lost")
	handedReaders("handed readers after fence loss", ":fence")
	direct("write after those readers")
	handedWriter("handed writer after fence loss", ":fence")
	handedWriter("writer handed by ForceUnlock", "force")
	if srv.Restartable() {
		if err := srv.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		// The pools' connections died with the server: let the probe's
		// stale ones fail (a lock call retries them by itself).
		for range 100 {
			if _, err := probe.State(ctx); err == nil {
				break
			}
		}
		direct("write after a restart without persistence")
		handedReaders("handed readers after the restart")
		direct("write after those readers")
	}
}

// TestWriteTokenAboveReadTokensAfterFenceLoss: the doc promises
// "a write hold's token (Token) is above that of every hold before it, read
// or write", and DESIGN §3 that tokens stay increasing if the counter key
// is lost. The write key keeps the last token of the last *write* hold
// ("<t> free"); read holds advance only the fence key. With the fence key
// gone (deleted, evicted), write_acquire seeds from the stale write key
// (rw_next_token(s.token)), handing out a write token at or below tokens
// already given to readers.
func TestWriteTokenAboveReadTokensAfterFenceLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		m := rwlock.New(fake.FakeBackend(t, srv), "fence", rwlock.WithLogger(nil))
		o := dsync.WithOwner(ctx)
		if err := m.LockContext(o); err != nil {
			t.Fatal(err)
		}
		first, _ := m.Token(o)
		if err := m.UnlockContext(o); err != nil {
			t.Fatal(err)
		}
		for range 5 {
			m.RLock()
			if st, err := m.State(ctx); err != nil || st.Mode != rwlock.Read {
				t.Fatalf("under RLock: %+v, %v", st, err)
			}
			m.RUnlock()
		}
		st, err := m.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		lastRead := st.Token
		if lastRead != first+5 {
			t.Logf("tokens: first write %d, last handed out after 5 reads %d", first, lastRead)
		}
		// With the fence key lost and nothing held, the next token is
		// seeded from the server clock (fence.lua), which has moved on: in
		// fake time, by a millisecond.
		srv.Del("dsync:rwlock:{fence}:fence")
		time.Sleep(time.Millisecond)
		if err := m.LockContext(o); err != nil {
			t.Fatal(err)
		}
		tok, _ := m.Token(o)
		m.UnlockContext(o)
		if tok <= lastRead {
			t.Errorf("write token after the fence key was lost = %d; want > %d, the last token handed to a read hold before it (the write key's stale copy %d seeded it)", tok, lastRead, first)
		}
		time.Sleep(time.Minute)
	})
}
