package rwlock_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/rwlock"
	"github.com/dsyncgo/dsync/tests/fake"
)

// Read holds handed to waiters draw tokens that the write key's copy of the
// last token does not know: a write after the fence key was lost must
// still get a token above theirs.
func TestWriteTokenAboveHandedReadTokensAfterFenceLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		w := rwlock.New(fake.FakeBackend(t, srv), "fence", rwlock.WithLogger(nil))
		r := rwlock.New(fake.FakeBackend(t, srv), "fence", rwlock.WithLogger(nil))
		o := dsync.WithOwner(ctx)
		if err := w.LockContext(o); err != nil {
			t.Fatal(err)
		}
		first, _ := w.Token(o)
		done := make(chan error, 3)
		for range 3 {
			go func() { done <- r.RLockContext(ctx) }()
		}
		synctest.Wait()
		if err := w.UnlockContext(o); err != nil { // hands the lock to the 3 readers
			t.Fatal(err)
		}
		for range 3 {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		st, err := w.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Token < first+3 {
			t.Fatalf("after 3 handed read holds the last token is %d; want at least %d", st.Token, first+3)
		}
		for range 3 {
			r.RUnlock()
		}
		// With the fence key lost and nothing held, the next token is
		// seeded from the server clock (fence.lua), which has moved on
		// since the read holds drew theirs: in fake time, a millisecond.
		srv.Del("dsync:rwlock:{fence}:fence")
		time.Sleep(time.Millisecond)
		if err := w.LockContext(o); err != nil {
			t.Fatal(err)
		}
		tok, _ := w.Token(o)
		w.UnlockContext(o)
		if tok <= st.Token {
			t.Errorf("write token after the fence key was lost = %d; want above %d, the last handed to a read hold (the write key knew only %d)", tok, st.Token, first)
		}
		time.Sleep(time.Minute)
	})
}
