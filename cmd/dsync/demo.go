package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/mutex"
)

// demo has workers, each with a backend of its own as separate processes
// would have, contend on one mutex, and reports what happened.
func demo(args []string) error {
	fs := flag.NewFlagSet("demo", flag.ExitOnError)
	addr := fs.String("redis", "", "address of a Redis server to use instead of the embedded one")
	workers := fs.Int("workers", 4, "contending workers, each with its own connection pool")
	rounds := fs.Int("rounds", 8, "acquisitions per worker")
	hold := fs.Duration("hold", 2*time.Millisecond, "time spent holding the mutex each round")
	fs.Parse(args)
	if *workers < 1 || *rounds < 1 || *hold < 0 {
		return errors.New("demo: -workers and -rounds must be positive, -hold not negative")
	}

	srv, err := openServer(*addr)
	if err != nil {
		return err
	}
	defer srv.close()
	name := "demo:" + dsync.NewID()[:8]
	fmt.Fprintf(out, "dsync demo on %s\n", srv)
	fmt.Fprintf(out, "%d workers x %d rounds on mutex %q, holding %v each time\n\n", *workers, *rounds, name, *hold)

	type acquisition struct {
		worker, round int
		seq           int64 // order of entry into the critical section
		token         int64
		waited        time.Duration
	}
	var (
		mu       sync.Mutex
		log      []acquisition
		inside   atomic.Int32
		overlaps atomic.Int32
		seq      atomic.Int64
		wg       sync.WaitGroup
		failed   = make(chan error, *workers)
	)
	start := time.Now()
	for w := 1; w <= *workers; w++ {
		c := srv.client()
		defer c.close()
		m := mutex.New(c.b, name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 1; r <= *rounds; r++ {
				// Each round is a job of its own: a fresh owner.
				ctx, cancel := context.WithTimeout(dsync.WithOwner(context.Background()), time.Minute)
				asked := time.Now()
				if err := m.LockContext(ctx); err != nil {
					cancel()
					failed <- fmt.Errorf("worker %d: %w", w, err)
					return
				}
				a := acquisition{worker: w, round: r, waited: time.Since(asked), seq: seq.Add(1)}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				a.token, _ = m.Token(ctx)
				fmt.Fprintf(out, "  worker %d round %d: acquired after %-10v token %d\n", w, r, a.waited.Round(time.Microsecond), a.token)
				time.Sleep(*hold)
				inside.Add(-1)
				err := m.UnlockContext(ctx)
				cancel()
				if err != nil {
					failed <- fmt.Errorf("worker %d: unlock: %w", w, err)
					return
				}
				mu.Lock()
				log = append(log, a)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(failed)
	for err := range failed {
		return err
	}

	slices.SortFunc(log, func(a, b acquisition) int { return int(a.seq - b.seq) })
	increasing := true
	for i := 1; i < len(log); i++ {
		if log[i].token <= log[i-1].token {
			increasing = false
		}
	}
	waits := make([]time.Duration, len(log))
	for i, a := range log {
		waits[i] = a.waited
	}
	slices.Sort(waits)
	pct := func(p float64) time.Duration { return waits[int(p*float64(len(waits)-1))].Round(time.Microsecond) }

	fmt.Fprintf(out, "\n%d acquisitions in %v\n", len(log), elapsed.Round(time.Millisecond))
	fmt.Fprintf(out, "wait: p50 %v, p99 %v, max %v\n", pct(0.5), pct(0.99), waits[len(waits)-1].Round(time.Microsecond))
	fmt.Fprintf(out, "overlaps (two holders at once): %d\n", overlaps.Load())
	fmt.Fprintf(out, "fencing tokens strictly increasing in acquisition order: %v\n", increasing)

	if err := demoLease(srv, name); err != nil {
		return err
	}
	if overlaps.Load() != 0 || !increasing {
		return errors.New("demo: mutual exclusion or token order violated")
	}
	return nil
}

// demoLease shows re-entry, then a fixed lease running out and the holder
// being told.
func demoLease(srv *server, name string) error {
	c := srv.client()
	defer c.close()
	ctx := dsync.WithOwner(context.Background())

	m := mutex.New(c.b, name+":reentry")
	for i := 0; i < 3; i++ {
		if err := m.LockContext(ctx); err != nil {
			return err
		}
	}
	n, err := m.HoldCount(ctx)
	if err != nil {
		return err
	}
	for i := 0; i < 3; i++ {
		if err := m.UnlockContext(ctx); err != nil {
			return err
		}
	}
	locked, err := m.IsLocked(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nre-entry: one owner locked 3 times (hold count %d); after 3 unlocks locked=%v\n", n, locked)

	const lease = 300 * time.Millisecond
	m = mutex.New(c.b, name+":lease", mutex.WithLease(lease))
	if err := m.LockContext(ctx); err != nil {
		return err
	}
	start := time.Now()
	select {
	case <-m.Done(ctx):
		fmt.Fprintf(out, "fixed %v lease: the holder was told its hold ended after %v\n", lease, time.Since(start).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		return errors.New("demo: lost signal did not fire")
	}
	if err := m.UnlockContext(ctx); errors.Is(err, dsync.ErrNotHeld) {
		fmt.Fprintln(out, "unlocking it afterwards reports:", err)
	}
	return nil
}
