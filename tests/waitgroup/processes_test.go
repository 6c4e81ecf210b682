package waitgroup_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/waitgroup"
)

// done has a worker count its unit down after ms of work, and reports
// when it called Done and when Done returned (Unix ns), with Done's error
// text; it is safe from any goroutine.
func (w *worker) done(ms int) (call, ret int64, errText string, err error) {
	if _, err := fmt.Fprintf(w.stdin, "done %d\n", ms); err != nil {
		return 0, 0, "", err
	}
	var lines [2]string
	for i := range lines {
		select {
		case l, ok := <-w.lines:
			if !ok {
				return 0, 0, "", errors.New("worker exited")
			}
			lines[i] = l
		case <-time.After(10 * time.Second):
			return 0, 0, "", errors.New("worker said nothing for 10s")
		}
	}
	fmt.Sscanf(lines[0], "calling %d", &call)
	rest, _ := strings.CutPrefix(lines[1], "done ")
	ns, errText, _ := strings.Cut(rest, " ")
	fmt.Sscan(ns, &ret)
	return call, ret, errText, nil
}

// 8 worker processes each add a unit, then count it down after 0-300ms of
// work; 4 waiters, each on a backend of its own, return once the last Done
// began, and within a few round trips of its return (4 times the 90th
// percentile of a script call's round trip measured at the start, and at
// least 5ms, for the scheduling of a loaded 2-vCPU machine): the Done that
// empties the group wakes them through pub/sub.
func TestEveryWaiterReturnsAtTheLastDone(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rtt := roundTrip(t, srv.NewBackend(t))
	bound := max(4*rtt, 5*time.Millisecond)
	p := prefix()
	ws := startWorkers(t, srv.Addr(), p, 2*time.Second, 8)
	rs := waiters(t, ctx, srv, p, 4)
	type out struct {
		call, ret int64
		text      string
		err       error
	}
	dones := make(chan out, len(ws))
	for _, w := range ws {
		go func() {
			call, ret, text, err := w.done(rand.IntN(300))
			dones <- out{call, ret, text, err}
		}()
	}
	var lastCall, lastRet int64
	for range ws {
		d := <-dones
		if d.err != nil || d.text != "<nil>" {
			t.Fatalf("Done: %s, %v", d.text, d.err)
		}
		lastCall, lastRet = max(lastCall, d.call), max(lastRet, d.ret)
	}
	var worst time.Duration
	for i, c := range rs {
		var r result
		select {
		case r = <-c:
		case <-time.After(10 * time.Second):
			t.Fatalf("waiter %d has not returned 10s after the last Done", i)
		}
		if r.err != nil {
			t.Fatalf("waiter %d: %v", i, r.err)
		}
		if at := r.at.UnixNano(); at < lastCall {
			t.Errorf("waiter %d returned %v before the last Done was called", i, time.Duration(lastCall-at))
		}
		d := time.Duration(r.at.UnixNano() - lastRet)
		worst = max(worst, d)
		if d > bound {
			t.Errorf("waiter %d returned %v after the last Done returned; want within %v (round trip %v)", i, d, bound, rtt)
		}
	}
	t.Logf("round trip (p90) %v; the waiters returned at most %v after the last Done returned (bound %v)", rtt, worst, bound)
	if st, err := waitgroup.New(srv.NewBackend(t), "g", waitgroup.WithPrefix(p)).State(ctx); err != nil || st.Count != 0 || st.Waiters != 0 {
		t.Errorf("state after the wait: %+v, %v", st, err)
	}
}

// One of 8 worker processes is killed (SIGKILL) before its Done, the
// others count theirs down: every one of 4 waiters returns the abandoned
// error, naming the killed worker and its unit, within its lease and
// 200ms of the kill, and not before the lease could have run out.
func TestKilledWorkerIsReported(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const lease = time.Second
	p := prefix()
	ws := startWorkers(t, srv.Addr(), p, lease, 8)
	rs := waiters(t, ctx, srv, p, 4)
	if err := ws[0].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	for _, w := range ws[1:] {
		go w.done(rand.IntN(300))
	}
	var slowest time.Duration
	for i, c := range rs {
		r := <-c
		var ab *waitgroup.AbandonedError
		if !errors.As(r.err, &ab) || !errors.Is(r.err, dsync.ErrAbandoned) || ab.Owner != ws[0].owner || ab.Units != 1 {
			t.Fatalf("waiter %d: %v; want the unit of %s abandoned", i, r.err, ws[0].owner)
		}
		d := r.at.Sub(killed)
		slowest = max(slowest, d)
		if d > lease+200*time.Millisecond || d < lease*2/3-50*time.Millisecond {
			t.Errorf("waiter %d returned %v after the kill; want within the lease %v and 200ms, and not before the lease could have run out", i, d, lease)
		}
	}
	t.Logf("every waiter told of the abandoned unit at most %v after the kill (lease %v)", slowest, lease)
}

// The group's keys deleted (DEL) under 4 waiters, with 4 worker units
// pending: every waiter returns ErrVanished, at its next heartbeat, rather
// than taking the missing count for 0; the workers' Done then fails with
// ErrNotHeld. So with the count's hash alone deleted.
func TestDeletedKeysAreReported(t *testing.T) {
	srv := testserver.Real(t)
	for _, v := range []struct {
		name     string
		suffixes []string
	}{
		{"all", []string{"", ":holders", ":waiters", ":done"}},
		{"count", []string{""}},
	} {
		t.Run(v.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			const timeout = 600 * time.Millisecond
			p := prefix()
			ws := startWorkers(t, srv.Addr(), p, 2*time.Second, 4)
			rs := waiters(t, ctx, srv, p, 4, waitgroup.WithWaiterTimeout(timeout))
			var keys []any
			for _, s := range v.suffixes {
				keys = append(keys, p+":waitgroup:{g}"+s)
			}
			if _, err := srv.Do(ctx, "DEL", keys...); err != nil {
				t.Fatal(err)
			}
			deleted := time.Now()
			for i, c := range rs {
				r := <-c
				if !errors.Is(r.err, waitgroup.ErrVanished) {
					t.Fatalf("waiter %d: %v; want ErrVanished", i, r.err)
				}
				if d := r.at.Sub(deleted); d > timeout/3+200*time.Millisecond {
					t.Errorf("waiter %d returned %v after the deletion; want within a heartbeat (%v)", i, d, timeout/3)
				}
			}
			for _, w := range ws {
				if _, _, text, err := w.done(0); err != nil || !strings.Contains(text, dsync.ErrNotHeld.Error()) {
					t.Errorf("Done after the deletion: %s, %v; want ErrNotHeld", text, err)
				}
			}
		})
	}
}
