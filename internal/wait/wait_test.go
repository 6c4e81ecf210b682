package wait

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
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
		actx := AttemptContext(ctx)
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

func TestAttemptContextBoundsACancellableContextByTheGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
		actx := AttemptContext(ctx)
		if actx.Done() != nil {
			t.Fatal("the attempt's context can be cancelled: a backend would spend a goroutine on it")
		}
		if d, ok := actx.Deadline(); !ok || time.Until(d) != SettleGrace {
			t.Errorf("the attempt's deadline is %v away (set: %v), want %v", time.Until(d), ok, SettleGrace)
		}
		if actx.Value(ctxKey{}) != "v" {
			t.Error("the attempt's context lost its parent's values")
		}
		// Its own deadline passing is an error that may pass while its
		// caller's context is live, and the caller's once it ended.
		err := fmt.Errorf("call: %w", context.DeadlineExceeded)
		if got := Unanswered(ctx, err); !Transient(got) {
			t.Errorf("Unanswered(live ctx) = %v: not transient", got)
		}
		cancel()
		if got := Unanswered(ctx, err); got != err {
			t.Errorf("Unanswered(cancelled ctx) = %v, want the error as is", got)
		}
		dctx, dcancel := context.WithTimeout(context.Background(), time.Hour)
		defer dcancel()
		if got := Unanswered(dctx, err); got != err {
			t.Errorf("Unanswered(ctx with a deadline) = %v, want the error as is", got)
		}
	})
}

func TestAttemptContextKeepsAContextThatCannotEnd(t *testing.T) {
	ctx := context.Background()
	if actx := AttemptContext(ctx); actx != ctx {
		t.Error("a context that cannot end was replaced")
	}
}
