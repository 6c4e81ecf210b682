package wait

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/hub"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestTransient(t *testing.T) {
	transient := []error{
		&net.OpError{Op: "read", Err: errors.New("connection reset")},
		fmt.Errorf("redigo: EVALSHA: %w", errors.New("EOF")),
		&backend.ServerError{Message: "LOADING Redis is loading the dataset in memory"},
		&backend.ServerError{Message: "BUSY Redis is busy running a script"},
		&backend.ServerError{Message: "OOM command not allowed"},
		&backend.ServerError{Message: "READONLY You can't write against a read only replica."},
	}
	permanent := []error{
		nil,
		context.Canceled,
		fmt.Errorf("wrapped: %w", context.DeadlineExceeded),
		dsync.ErrClosed,
		fmt.Errorf("%w: want integer", dsync.ErrUnexpectedReply),
		&backend.ServerError{Message: "ERR user_script:1: Script attempted to access nonexistent global variable"},
		&backend.ServerError{Message: "WRONGTYPE Operation against a key holding the wrong kind of value"},
	}
	for _, err := range transient {
		if !Transient(err) {
			t.Errorf("Transient(%v) = false", err)
		}
	}
	for _, err := range permanent {
		if Transient(err) {
			t.Errorf("Transient(%v) = true", err)
		}
	}
}

func TestBackoffIsCappedAndGrows(t *testing.T) {
	for n := 1; n <= 20; n++ {
		d := Backoff(n)
		if d <= 0 || d > time.Second {
			t.Fatalf("Backoff(%d) = %v, want within (0, 1s]", n, d)
		}
		ceiling := min(10*time.Millisecond<<min(n-1, 7), time.Second)
		if d < ceiling/2 || d > ceiling {
			t.Errorf("Backoff(%d) = %v, want in [%v, %v]", n, d, ceiling/2, ceiling)
		}
	}
}

func TestSleepStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if Sleep(ctx, time.Hour) {
		t.Fatal("Sleep reported a full sleep on a cancelled context")
	}
	if time.Since(start) > time.Second {
		t.Fatal("Sleep did not return promptly")
	}
}

func TestAttemptContextOutlivesADeadlineByTheGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), ctxKey{}, "v"), time.Millisecond)
		defer cancel()
		actx, release := AttemptContext(ctx)
		defer release()
		if actx.Done() != nil {
			t.Fatal("the attempt's context can be cancelled: a backend would spend a goroutine on it")
		}
		d, ok := actx.Deadline()
		if want, _ := ctx.Deadline(); !ok || d.Sub(want) != SettleGrace {
			t.Errorf("the attempt's deadline is %v after its caller's, want %v", d.Sub(want), SettleGrace)
		}
		if actx.Value(ctxKey{}) != "v" {
			t.Error("the attempt's context lost its parent's values")
		}
	})
}

type ctxKey struct{}

// An attempt for a context that can be cancelled but has no deadline is
// bounded by SettleGrace from when it begins, with a context that a
// backend needs no goroutine to watch.
func TestAttemptContextBoundsACancellableOneByTheGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
		defer cancel()
		actx, release := AttemptContext(ctx)
		defer release()
		if actx.Done() != nil {
			t.Fatal("the attempt's context can be cancelled: a backend would spend a goroutine on it")
		}
		if d, ok := actx.Deadline(); !ok || time.Until(d) != SettleGrace {
			t.Errorf("the attempt's deadline is %v away (%v); want %v", time.Until(d), ok, SettleGrace)
		}
		if actx.Value(ctxKey{}) != "v" {
			t.Error("the attempt's context lost its parent's values")
		}
	})
}

// A context that Watch marked gets attempts that wait for the reply while
// it is alive, and end SettleGrace after it does.
func TestAttemptContextOutlivesACancellationByTheGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		actx, release := AttemptContext(Watch(ctx))
		defer release()
		if _, ok := actx.Deadline(); ok {
			t.Error("a watched attempt has a deadline: a server slower than it would fail every attempt")
		}
		cancel()
		start := time.Now()
		synctest.Wait()
		if actx.Err() != nil {
			t.Fatal("the attempt's context ended with its caller's")
		}
		<-actx.Done()
		if d := time.Since(start); d != SettleGrace {
			t.Errorf("the attempt's context ended %v after its caller's, want %v", d, SettleGrace)
		}
	})
}

func TestAttemptContextReleaseEndsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		actx, release := AttemptContext(Watch(ctx))
		release()
		if actx.Err() == nil {
			t.Error("context still live after release")
		}
		// Nothing is left to fire later.
		cancel()
		synctest.Wait()
	})
}

func TestWatchKeepsADeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if Watch(ctx) != ctx {
		t.Error("Watch marked a context with a deadline, whose attempts are bounded by it")
	}
	if Watch(context.Background()) != context.Background() {
		t.Error("Watch marked a context that can never end")
	}
}

// unanswered is an acquisition whose first attempts are cut off by the
// bound AttemptContext gives them while ctx is alive, as on a server
// slower than SettleGrace, and whose attempts succeed once they wait for
// the reply (a watched context).
type unanswered struct {
	h       *hub.Hub
	tries   int
	watched []bool
}

func (u *unanswered) Hub() *hub.Hub { return u.h }

func (u *unanswered) Try(ctx context.Context, _ Try) (Result, error) {
	u.tries++
	actx, release := AttemptContext(ctx)
	defer release()
	_, bounded := actx.Deadline()
	u.watched = append(u.watched, !bounded)
	if bounded {
		return Result{}, Unanswered(ctx, fmt.Errorf("read: %w", context.DeadlineExceeded))
	}
	return Result{Acquired: true}, nil
}

func (u *unanswered) Granted(int64, time.Time) bool { return false }
func (u *unanswered) Abandon(context.Context) error { return nil }

// A wait whose attempt went unanswered in SettleGrace, with its context
// alive, makes its next attempts wait for the reply: on a server slower
// than that bound, each attempt cut off would fail, and the wait would
// never end while ctx is alive.
func TestUnansweredAttemptIsRetriedWithoutTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := &unanswered{h: hub.New(quiet{}, nil)}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if err := Acquire(ctx, Spec{Channel: "ch", WaiterID: "op", Heartbeat: time.Hour}, u); err != nil {
			t.Fatalf("Acquire: %v after %d attempts (watched: %v); want the second to acquire", err, u.tries, u.watched)
		}
		if !slices.Equal(u.watched, []bool{false, true}) {
			t.Errorf("attempts watched: %v; want the first bounded, the second watched", u.watched)
		}
	})
}

func TestAttemptContextKeepsAContextThatCannotEnd(t *testing.T) {
	ctx := context.Background()
	if actx, release := AttemptContext(ctx); actx != ctx {
		t.Error("a context that cannot end was replaced")
	} else {
		release()
	}
}
