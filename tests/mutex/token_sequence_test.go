package mutex_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/tests/fake"
)

// TestFakeTimeTokensGrowAcrossEveryKindOfHold: the fencing tokens of one
// mutex grow strictly whatever took the hold and whatever drew its token:
// plain holds whose token Token drew, or State drew (and Token then
// returns), holds drawn by a re-entry, hand-offs to waiters, holds after
// an expiry, after the lock key was deleted under a hold, and after the
// fence key was deleted while a hold kept the token.
func TestFakeTimeTokensGrowAcrossEveryKindOfHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "seq"
		key := "dsync:mutex:{" + name + "}"
		a := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		b := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		var last int64
		check := func(step string, tok int64, err error) {
			t.Helper()
			if err != nil {
				t.Fatalf("%s: %v", step, err)
			}
			if tok <= last {
				t.Errorf("%s: token %d, want above the last, %d", step, tok, last)
			}
			last = max(last, tok)
		}

		// A plain hold, its token drawn by Token.
		a.Lock()
		tok, err := a.Token(ctx)
		check("plain hold, Token", tok, err)
		a.Unlock()

		// A plain hold whose token nobody draws, then one whose token
		// State draws: Token returns the same.
		a.Lock()
		//lint:ignore SA2001 a hold taken only to be released with no token drawn
		a.Unlock()
		a.Lock()
		st, err := b.State(ctx)
		check("plain hold, State", st.Token, err)
		if tok, err := a.Token(ctx); err != nil || tok != st.Token {
			t.Errorf("Token after State drew %d: %d, %v; want the same", st.Token, tok, err)
		}
		a.Unlock()

		// A re-entry draws the plain hold's token.
		o := dsync.WithOwner(ctx)
		if err := a.LockContext(o); err != nil {
			t.Fatal(err)
		}
		if err := a.LockContext(o); err != nil {
			t.Fatal(err)
		}
		tok, err = a.Token(o)
		check("re-entered hold", tok, err)
		a.UnlockContext(o)
		a.UnlockContext(o)

		// A hand-off to a waiter, in hand-off mode (the waiter waits past
		// the threshold).
		a.Lock()
		got := queue(t, ctx, b)
		time.Sleep(10 * time.Millisecond)
		a.Unlock()
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		tok, err = b.Token(ctx)
		check("handed hold", tok, err)
		b.Unlock()

		// A wake-up in normal mode: the waiter takes the free mutex.
		a.Lock()
		got = queue(t, ctx, b)
		a.Unlock()
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		tok, err = b.Token(ctx)
		check("woken waiter's hold", tok, err)
		b.Unlock()

		// An expired hold whose token was drawn.
		fixed := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLease(time.Second), mutex.WithLogger(nil))
		fixed.Lock()
		tok, err = fixed.Token(ctx)
		check("fixed lease", tok, err)
		time.Sleep(2 * time.Second)
		a.Lock()
		tok, err = a.Token(ctx)
		check("after an expiry", tok, err)

		// The lock key deleted under a hold with a token.
		srv.Del(key)
		b.Lock()
		tok, err = b.Token(ctx)
		check("after the lock key was deleted", tok, err)

		// The fence key deleted while the hold keeps the token, then the
		// hold is released and the next one draws.
		srv.Del(key + ":fence")
		got = queue(t, ctx, a) // a waiter: the release hands over
		time.Sleep(10 * time.Millisecond)
		b.Unlock()
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		tok, err = a.Token(ctx)
		check("handed after the fence key was deleted", tok, err)
		a.Unlock()
		a.Unlock() // the hold lost with the lock key
		a.Lock()
		tok, err = a.Token(ctx)
		check("after the fence key was deleted", tok, err)
		a.Unlock()
	})
}
