package mutex_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/tests/fake"
)

// TestFakeTimeWrongTypeAtCompanionKeys: a key of another type at the fence
// key or at the queue keys surfaces as dsync.ErrUnexpectedReply from the
// calls that touch it, and leaves no hold and no waiter behind: the
// mutex is free again once its holder releases.
func TestFakeTimeWrongTypeAtCompanionKeys(t *testing.T) {
	for _, suffix := range []string{":fence", ":queue", ":expiry"} {
		t.Run(suffix[1:], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := fake.Fake(t)
				ctx := context.Background()
				const name = "wt"
				key := "dsync:mutex:{" + name + "}"
				if _, err := srv.Lpush(key+suffix, "x"); err != nil {
					t.Fatal(err)
				}
				holder := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
				waiter := mutex.New(fake.FakeBackend(t, srv), name, mutex.WithLogger(nil))
				holder.Lock() // a plain SET: no companion touched
				if suffix == ":fence" {
					if _, err := holder.Token(ctx); !errors.Is(err, dsync.ErrUnexpectedReply) {
						t.Errorf("Token with a list at the fence key: %v, want ErrUnexpectedReply", err)
					}
				}
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				err := waiter.LockContext(wctx)
				if !errors.Is(err, dsync.ErrUnexpectedReply) {
					t.Errorf("LockContext behind a hold, a list at %s: %v, want ErrUnexpectedReply", suffix, err)
				}
				synctest.Wait()
				if err := holder.UnlockContext(ctx); err != nil {
					t.Errorf("holder's unlock: %v", err)
				}
				if locked, err := waiter.IsLocked(ctx); err != nil && !errors.Is(err, dsync.ErrUnexpectedReply) || locked {
					t.Errorf("IsLocked after the holder's unlock: %v, %v; want free", locked, err)
				}
				if srv.Exists(key) {
					v, _ := srv.Get(key)
					t.Errorf("lock key left after every call ended: %q", v)
				}
				for _, k := range srv.Keys() {
					if k != key+suffix {
						t.Errorf("key %s left behind", k)
					}
				}
			})
		})
	}
}
