package lease

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync/backend"
)

// lateReply is a fake whose calls run on the server at once but whose
// replies reach the scheduler only when let go: the goroutine that
// applies them ran late.
type lateReply struct {
	*fakeBackend
	ran chan struct{} // receives once per call that ran
	go_ chan struct{} // closed to let the replies through
}

func (b *lateReply) Eval(ctx context.Context, s *backend.Script, ks []string, args ...any) (any, error) {
	r, err := b.fakeBackend.Eval(ctx, s, ks, args...)
	select {
	case b.ran <- struct{}{}:
	default:
	}
	<-b.go_
	return r, err
}

// TestCheckWhileRenewalInFlightChecksAgain: a reconnection's check that
// comes while a renewal is in flight, whose call ran on the server before
// the server lost its data, checks that lease again once the reply is in.
// Before, the check looked only at the leases in the queue: the late reply
// rescheduled the lease a third of its TTL on, and its holder learned of
// the loss only then, not at the reconnection.
func TestCheckWhileRenewalInFlightChecksAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		b := &lateReply{fakeBackend: f, ran: make(chan struct{}, 1), go_: make(chan struct{})}
		const ttl = 3 * time.Second
		t0 := time.Now()
		spec := watchdog("check:inflight", ttl)
		f.acquire(spec.Key, t0, ttl)
		l := Start(b, spec, t0)
		h.leases = append(h.leases, l)

		time.Sleep(ttl / 3) // the renewal is sent, and runs on the server
		<-b.ran
		f.drop(spec.Key) // the server restarts without its data
		sched(b).Check() // the reconnection is noticed
		close(b.go_)     // the renewal's reply, from before, comes in
		synctest.Wait()

		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		if !isDone(l) || !l.Lost() {
			t.Fatalf("10ms after the reply of a renewal sent before the check: Done closed %v, Lost %v; want the lease checked again and lost", isDone(l), l.Lost())
		}
	})
}
