package semaphore_test

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/semaphore"
)

// A capacity past MaxCapacity, which the server's Lua cannot count
// exactly, is refused before any I/O, as New's and as SetCapacity's: a
// capacity of 2^63-1 stored as -2^63 by the script let Acquire(2^63-1)
// succeed and State report a negative capacity.
func TestCapacityBeyondMaxCapacity(t *testing.T) {
	var calls atomic.Int64
	ctx, cancel := context.WithTimeout(dsync.WithOwner(context.Background()), 5*time.Second)
	defer cancel()
	for _, c := range []int64{math.MaxInt64, semaphore.MaxCapacity + 1} {
		s := semaphore.New(&countingBackend{&calls}, "s", c)
		if err := s.Acquire(ctx, 1); !errors.Is(err, dsync.ErrInvalidPermits) {
			t.Errorf("capacity %d: Acquire(1) = %v, want ErrInvalidPermits", c, err)
		}
		if _, err := s.AcquirePermit(ctx); !errors.Is(err, dsync.ErrInvalidPermits) {
			t.Errorf("capacity %d: AcquirePermit = %v, want ErrInvalidPermits", c, err)
		}
	}
	s := semaphore.New(&countingBackend{&calls}, "s", 2)
	for _, c := range []int64{math.MaxInt64, semaphore.MaxCapacity + 1} {
		if err := s.SetCapacity(ctx, c); !errors.Is(err, dsync.ErrInvalidPermits) {
			t.Errorf("SetCapacity(%d) = %v, want ErrInvalidPermits", c, err)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("%d calls reached the backend", n)
	}
}
