package mutex_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/tests/fake"
)

// TestFakeTimePlainHoldForcedByToken: a plain hold has no token until one
// is drawn; State draws it, and ForceUnlockToken with that token takes the
// hold, in this process (the holder's Done closes at once) or in another
// (the holder learns it at its next renewal or call): its Token and Unlock
// then report ErrNotHeld. An older token never takes a newer plain hold,
// whose token is not drawn yet.
func TestFakeTimePlainHoldForcedByToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "forced"
		hb := fake.FakeBackend(t, srv)
		holder := mutex.New(hb, name, mutex.WithLogger(nil))
		admin := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
		here := mutex.New(hb, name, mutex.WithLogger(nil))

		for _, forcer := range []*mutex.Mutex{here, admin} {
			o := dsync.WithOwner(ctx)
			if err := holder.LockContext(o); err != nil {
				t.Fatal(err)
			}
			st, err := forcer.State(ctx)
			if err != nil || !st.Locked || st.Token == 0 {
				t.Fatalf("State of a plain hold: %+v, %v; want held with a token drawn", st, err)
			}
			if ok, err := forcer.ForceUnlockToken(ctx, st.Token+1); ok || err != nil {
				t.Errorf("ForceUnlockToken with another token: %v, %v; want false", ok, err)
			}
			if ok, err := forcer.ForceUnlockToken(ctx, st.Token); !ok || err != nil {
				t.Fatalf("ForceUnlockToken with the hold's token: %v, %v; want true", ok, err)
			}
			if forcer == here {
				select {
				case <-holder.Done(o):
				default:
					t.Error("the holder's Done is open after ForceUnlockToken in its process")
				}
			}
			if tok, err := holder.Token(o); !errors.Is(err, dsync.ErrNotHeld) {
				t.Errorf("Token of a forced hold: %d, %v; want ErrNotHeld", tok, err)
			}
			if err := holder.UnlockContext(o); !errors.Is(err, dsync.ErrNotHeld) {
				t.Errorf("Unlock of a forced hold: %v; want ErrNotHeld", err)
			}

			// A newer plain hold, its token not drawn: the old token
			// does not name it.
			other := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
			other.Lock()
			if ok, err := forcer.ForceUnlockToken(ctx, st.Token); ok || err != nil {
				t.Errorf("ForceUnlockToken with the old token against a new plain hold: %v, %v; want false", ok, err)
			}
			if tok, err := other.Token(ctx); err != nil || tok <= st.Token {
				t.Errorf("the new hold's token: %d, %v; want above %d", tok, err, st.Token)
			}
			other.Unlock()
		}
	})
}
