package rwlock_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/rwlock"
	"github.com/dsyncgo/dsync/tests/fake"
)

// TestExpiredWriteWrongTypeReadersKeyWritesNothing: the write hold ran
// out with a reader and then a writer waiting, and the read holds' hash
// holds something else. A newcomer's attempt, the first script to find
// the write hold ended, passes the lock on (readers_due): it failed only
// at writing the reader's hold, having taken the reader's entry off the
// waiting set and drawn its token. Once the key was repaired, the reader
// had lost its place, and the writer went first. The attempt must fail
// before it writes anything.
func TestExpiredWriteWrongTypeReadersKeyWritesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		ctx := context.Background()
		const name = "wtreaders"
		holder := rwlock.New(fake.FakeBackend(t, srv), name, rwlock.WithLease(time.Second), rwlock.WithLogger(nil))
		o, rGot, wGot, open := expiredWriteQueue(t, srv, name, holder, func() error { return holder.LockContext(ctx) })
		time.Sleep(1100 * time.Millisecond)
		k := key("dsync", name)
		waiting, err := srv.ZMembers(k + ":rwait")
		if err != nil || len(waiting) != 1 {
			t.Fatalf("waiting readers past the write hold's lease: %q, %v; want one", waiting, err)
		}
		w, _ := srv.Get(k)
		fence, _ := srv.Get(k + ":fence")
		if err := srv.Set(k+":readers", "garbage"); err != nil {
			t.Fatal(err)
		}
		n := rwlock.New(fake.NewGated(t, fake.FakeBackend(t, srv)), name, rwlock.WithLogger(nil))
		if ok, err := n.TryLockContext(ctx); ok || !errors.Is(err, dsync.ErrUnexpectedReply) {
			t.Fatalf("a newcomer's TryLock with the read holds' key of the wrong type = %v, %v; want ErrUnexpectedReply", ok, err)
		}
		if got, err := srv.ZMembers(k + ":rwait"); err != nil || len(got) != 1 || got[0] != waiting[0] {
			t.Errorf("waiting readers after the failed attempt: %q, %v; want %q, untouched", got, err, waiting)
		}
		if got, _ := srv.Get(k); got != w {
			t.Errorf("the main key after the failed attempt: %q; want %q, untouched", got, w)
		}
		if got, _ := srv.Get(k + ":fence"); got != fence {
			t.Errorf("the fence key after the failed attempt: %q; want %q, no token drawn", got, fence)
		}
		// Repaired, the lock goes on as if the attempt had not been made.
		srv.Del(k + ":readers")
		readerHandedFirst(t, o, rGot, wGot, open)
	})
}
