package semaphore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/semaphore"
)

// An ownerless Release(n) that would cover permits whose lease ran out
// (issue 26, defect 2): one handle, a fixed lease, Acquire(2), later
// Acquire(2); once the first two have expired the server holds 2, and
// Release(3) is refused (ErrNotHeld) and changes nothing on the server:
// the live acquisition keeps its 2 permits, which a Release(2) then gives
// back.
func TestReleaseOverLostPermitsReleasesNothing(t *testing.T) {
	for kind, newBackend := range servers(t) {
		t.Run(kind, func(t *testing.T) {
			const lease = 1200 * time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			name := "relover-" + dsync.NewID()[:8]
			s := semaphore.New(newBackend(), name, 4, semaphore.WithLease(lease), semaphore.WithLogger(nil))
			probe := semaphore.New(newBackend(), name, 4)
			if err := s.Acquire(ctx, 2); err != nil {
				t.Fatal(err)
			}
			first := s.Done(ctx)
			time.Sleep(lease / 2) // time is what is tested: the second lease ends later
			if err := s.Acquire(ctx, 2); err != nil {
				t.Fatal(err)
			}
			second := s.Done(ctx)
			select {
			case <-first:
			case <-time.After(lease):
				t.Fatal("the first acquisition's lease did not end")
			}
			// The first permits are gone on the server once their lease
			// (plus the margin) has passed.
			awaitState(t, ctx, probe, "the first permits expired", func(st semaphore.State) bool { return st.Held == 2 })
			err := s.Release(ctx, 3)
			if !errors.Is(err, dsync.ErrNotHeld) {
				t.Errorf("Release(3) over 2 lost and 2 live permits = %v, want ErrNotHeld", err)
			}
			st, serr := probe.State(ctx)
			select {
			case <-second:
				t.Skipf("the second lease ended before the check (a loaded machine): %+v", st)
			default:
			}
			if serr != nil || st.Held != 2 || st.Holders != 1 {
				t.Fatalf("after the refused Release(3): %+v, %v; want the live 2 permits still held", st, serr)
			}
			if err := s.Release(ctx, 2); err != nil {
				t.Fatalf("Release(2) of the live acquisition after the refused Release(3): %v", err)
			}
			if st, err := probe.State(ctx); err != nil || st.Held != 0 {
				t.Fatalf("after Release(2): %+v, %v; want every permit back", st, err)
			}
		})
	}
}
