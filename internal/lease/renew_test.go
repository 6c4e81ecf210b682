package lease

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
)

// Failed renewals, and Extend against queued, in-flight and stuck ones.

// TestRenewalErrorsRetryUntilDeadline: renewals that fail are retried every
// TTL/10 (here), and the lease is lost exactly at its deadline.
func TestRenewalErrorsRetryUntilDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		t0 := time.Now()
		l := h.start(f, watchdog("fail:1", ttl), t0)
		f.setErr(errUnavailable)

		sleepUntil(t0.Add(ttl - time.Millisecond))
		assertActive(t, f, l)
		sleepUntil(t0.Add(ttl))
		assertEnded(t, f, l, true)

		ts := f.callsOf("fail:1")
		if len(ts) < 3 {
			t.Fatalf("%d renewal attempts, want retries", len(ts))
		}
		if ts[0].Sub(t0) != ttl/3 {
			t.Errorf("first attempt at t0+%v, want t0+%v", ts[0].Sub(t0), ttl/3)
		}
		retry := ttl / 10
		for i := 1; i < len(ts); i++ {
			if gap := ts[i].Sub(ts[i-1]); gap != retry {
				t.Errorf("retry %d came %v after the previous attempt, want %v", i, gap, retry)
			}
		}
		if last := ts[len(ts)-1]; !last.Before(t0.Add(ttl)) || last.Before(t0.Add(ttl-retry)) {
			t.Errorf("last attempt at t0+%v, want within the last retry interval before the deadline", last.Sub(t0))
		}
		n := len(ts)
		sleepUntil(t0.Add(3 * ttl))
		if got := f.numCalls(); got != n {
			t.Errorf("%d more calls after the loss", got-n)
		}
	})
}

// TestRenewalTransientErrorRecovers: after two failed attempts a renewal
// succeeds; the lease stays and is back to renewing every TTL/3.
func TestRenewalTransientErrorRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		t0 := time.Now()
		l := h.start(f, watchdog("flaky:1", ttl), t0)
		f.failNextCalls(2)
		sleepUntil(t0.Add(4 * ttl))
		assertActive(t, f, l)
		ts := f.callsOf("flaky:1")
		want := []time.Duration{1000, 1300, 1600, 2600, 3600} // ms after t0
		for i, w := range want {
			if i >= len(ts) {
				t.Fatalf("only %d calls", len(ts))
			}
			if got := ts[i].Sub(t0); got != w*time.Millisecond {
				t.Errorf("call %d at t0+%v, want t0+%v", i, got, w*time.Millisecond)
			}
		}
		if got, want := l.Deadline(), ts[len(ts)-1].Add(ttl); !got.Equal(want) {
			t.Errorf("Deadline = last renewal + %v, want + %v", got.Sub(ts[len(ts)-1]), ttl)
		}
	})
}

// TestMalformedReplyIsRetried: a reply that is not one integer per lease
// is a failed renewal, not a loss.
func TestMalformedReplyIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		t0 := time.Now()
		l := h.start(f, watchdog("odd:1", ttl), t0)
		// w answers renewals with an empty array, which backend.Ints
		// rejects as an unexpected reply.
		w := &shortReply{fakeBackend: f}
		spec := watchdog("odd:3", ttl)
		f.acquire(spec.Key, t0, ttl)
		l3 := Start(w, spec, t0)
		h.leases = append(h.leases, l3)

		sleepUntil(t0.Add(ttl/3 + 100*time.Millisecond))
		assertActive(t, f, l)
		assertActive(t, w, l3)
		if _, next := queued(l3); next.Sub(t0) != ttl/3+ttl/10 {
			t.Errorf("after a malformed reply, next look at t0+%v, want a retry at t0+%v", next.Sub(t0), ttl/3+ttl/10)
		}
		sleepUntil(t0.Add(ttl))
		assertEnded(t, w, l3, true)
		assertActive(t, f, l)
	})
}

// shortReply answers renewals with an empty array.
type shortReply struct{ *fakeBackend }

func (s *shortReply) Eval(ctx context.Context, sc *backend.Script, ks []string, args ...any) (any, error) {
	if _, err := s.fakeBackend.Eval(ctx, sc, ks, args...); err != nil {
		return nil, err
	}
	return []any{}, nil
}

// TestRenewalGoneLosesAtOnce: a renewal that reports the hold gone loses
// the lease at once, while the other leases of the batch stay.
func TestRenewalGoneLosesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		t0 := time.Now()
		gone := h.start(f, watchdog("gone:1", ttl), t0)
		kept := h.start(f, watchdog("gone:2", ttl), t0)
		sleepUntil(t0.Add(ttl/6 + time.Millisecond))
		f.drop("gone:1")

		sleepUntil(t0.Add(ttl/3 - time.Millisecond))
		assertActive(t, f, gone)
		sleepUntil(t0.Add(ttl / 3))
		assertEnded(t, f, gone, true)
		assertActive(t, f, kept)
		if c := f.callLog(); len(c) != 1 || len(c[0].holds) != 2 {
			t.Fatalf("calls %+v, want one call renewing both", c)
		}
		sleepUntil(t0.Add(2 * ttl))
		if ts := f.callsOf("gone:1"); len(ts) != 1 {
			t.Errorf("the lost lease was renewed %d times, want once", len(ts))
		}
		assertActive(t, f, kept)
	})
}

// TestRenewalErrClosedLosesAtOnce: a renewal failing with ErrClosed (even
// wrapped) loses the lease at once, with no retry.
func TestRenewalErrClosedLosesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		t0 := time.Now()
		l := h.start(f, watchdog("closed:1", ttl), t0)
		f.setErr(fmt.Errorf("adapter: %w", dsync.ErrClosed))
		sleepUntil(t0.Add(ttl/3 - time.Millisecond))
		assertActive(t, f, l)
		sleepUntil(t0.Add(ttl / 3))
		assertEnded(t, f, l, true)
		sleepUntil(t0.Add(2 * ttl))
		if c := f.numCalls(); c != 1 {
			t.Errorf("%d calls, want 1 (no retry after ErrClosed)", c)
		}
	})
}

// TestExtendQueued: Extend moves a queued lease's deadline and next
// renewal, and reorders the queue: another lease that is now due first is
// renewed on time. An older acquisition does not move the deadline back.
func TestExtendQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 30 * time.Second
		interval := ttl / 3
		t0 := time.Now()
		a := h.start(f, watchdog("extend:a", ttl), t0)                    // due t0+10s
		b := h.start(f, watchdog("extend:b", ttl), t0.Add(4*time.Second)) // due t0+14s
		sleepUntil(t0.Add(9 * time.Second))
		t1 := time.Now()
		f.acquire("extend:a", t1, ttl)
		a.Extend(t1, ttl) // a now due t0+19s, after b
		if got := a.Deadline(); !got.Equal(t1.Add(ttl)) {
			t.Errorf("Deadline = t0+%v, want t0+%v", got.Sub(t0), t1.Add(ttl).Sub(t0))
		}
		a.Extend(t0, ttl) // older: ignored
		if got := a.Deadline(); !got.Equal(t1.Add(ttl)) {
			t.Errorf("an older Extend moved the deadline to t0+%v", got.Sub(t0))
		}
		if n, next := queued(a); n != 1 || !next.Equal(t1.Add(interval)) {
			t.Errorf("queued %d times, next t0+%v; want once, t0+%v", n, next.Sub(t0), t1.Add(interval).Sub(t0))
		}
		sleepUntil(t1.Add(interval))
		if ts := f.renewedAt("extend:a"); len(ts) != 1 || ts[0].After(t1.Add(interval)) || ts[0].Before(t1.Add(interval-ttl/6)) {
			t.Errorf("extended lease renewed at %v, want once, by t1+TTL/3", ts)
		}
		if ts := f.renewedAt("extend:b"); len(ts) == 0 || ts[0].After(t0.Add(4*time.Second+interval)) {
			t.Errorf("the other lease renewed at %v, want by t0+%v", ts, 4*time.Second+interval)
		}
		assertActive(t, f, a)
		assertActive(t, f, b)
	})
}

// TestExtendDuringInflightRenewal: Extend while the lease's renewal is in
// flight moves its deadline; when the renewal returns, the lease is queued
// once, not lost, and renewed again in time.
func TestExtendDuringInflightRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		interval := ttl / 3
		t0 := time.Now()
		l := h.start(f, watchdog("extend:f", ttl), t0)
		open := f.block()
		sleepUntil(t0.Add(interval)) // renewal sent at t0+1s, blocked
		if f.inFlight() != 1 {
			t.Fatal("renewal not in flight")
		}
		sleepUntil(t0.Add(interval + 500*time.Millisecond))
		t1 := time.Now()
		f.acquire("extend:f", t1, ttl)
		l.Extend(t1, ttl)
		if got := l.Deadline(); !got.Equal(t1.Add(ttl)) {
			t.Errorf("Deadline after Extend = t0+%v, want t0+%v", got.Sub(t0), t1.Add(ttl).Sub(t0))
		}
		if n, _ := queued(l); n != 0 {
			t.Errorf("in-flight lease queued %d times by Extend", n)
		}
		sleepUntil(t1.Add(100 * time.Millisecond))
		open()
		synctest.Wait()
		assertActive(t, f, l)
		n, next := queued(l)
		if n != 1 {
			t.Fatalf("after the renewal returned, queued %d times, want 1", n)
		}
		sent := t0.Add(interval)
		if got := l.Deadline(); got.Before(sent.Add(ttl)) {
			t.Errorf("Deadline = t0+%v, before the renewal's sent+TTL (t0+%v)", got.Sub(t0), sent.Add(ttl).Sub(t0))
		}
		if next.After(t1.Add(interval)) || next.Before(sent.Add(interval)) {
			t.Errorf("next renewal at t0+%v, want in [t0+%v, t0+%v]", next.Sub(t0), sent.Add(interval).Sub(t0), t1.Add(interval).Sub(t0))
		}
		// Renewed again at next, and on every interval after.
		sleepUntil(next.Add(4 * interval))
		ts := f.callsOf("extend:f")
		if len(ts) < 5 || !ts[1].Equal(next) {
			t.Fatalf("renewals at %v, want the second at t0+%v and one per interval after", ts, next.Sub(t0))
		}
		for i := 2; i < len(ts); i++ {
			if gap := ts[i].Sub(ts[i-1]); gap != interval {
				t.Errorf("renewal %d came %v after the previous, want %v", i, gap, interval)
			}
		}
		assertActive(t, f, l)
	})
}

// TestExtendDuringInflightRenewalKeepsLaterDeadline: a renewal sent before
// a re-acquisition must not move the deadline that re-acquisition set
// back: both reset the server's expiry, so the hold is known valid until
// the later of the two, and Extend itself never moves a deadline back.
func TestExtendDuringInflightRenewalKeepsLaterDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		t0 := time.Now()
		l := h.start(f, watchdog("extend:m", ttl), t0)
		open := f.block()
		sleepUntil(t0.Add(ttl / 3))
		sleepUntil(t0.Add(ttl/3 + 500*time.Millisecond))
		t1 := time.Now()
		f.acquire("extend:m", t1, ttl)
		l.Extend(t1, ttl)
		extended := l.Deadline()
		open()
		synctest.Wait()
		if got := l.Deadline(); got.Before(extended) {
			t.Errorf("the in-flight renewal's success moved the deadline back from t0+%v (set by Extend) to t0+%v",
				extended.Sub(t0), got.Sub(t0))
		}
	})
}

// TestExtendDuringStuckRenewal: a renewal stuck until the lease's old
// deadline fails then, but a re-acquisition meanwhile keeps the lease: it
// is retried, not lost at the old deadline.
func TestExtendDuringStuckRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.fake()
		const ttl = 3 * time.Second
		t0 := time.Now()
		l := h.start(f, watchdog("extend:s", ttl), t0)
		f.setStuck(scriptA)
		sleepUntil(t0.Add(ttl / 3))
		sleepUntil(t0.Add(2 * time.Second))
		t1 := time.Now()
		f.acquire("extend:s", t1, ttl)
		l.Extend(t1, ttl)
		sleepUntil(t0.Add(ttl)) // the stuck call's context ends
		assertActive(t, f, l)
		f.unblock()
		sleepUntil(t0.Add(ttl + ttl/10))
		ts := f.callsOf("extend:s")
		if len(ts) != 2 || !ts[1].Equal(t0.Add(ttl+ttl/10)) {
			t.Errorf("calls at %v, want a retry TTL/10 after the stuck call failed", ts)
		}
		sleepUntil(t1.Add(2 * ttl))
		assertActive(t, f, l)
	})
}
