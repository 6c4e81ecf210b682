package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/keys"
	"github.com/dsyncgo/dsync/mutex"
	dotel "github.com/dsyncgo/dsync/otel"
)

const demoDoc = `demo has workers, each with a connection pool of its own as separate
processes would have, take turns on a mutex with a random name, and reports
the waits, that no two held it at once, and that the fencing tokens
increased; then it shows re-entry and a fixed lease running out.

It runs on an embedded miniredis unless -redis, -cluster or -sentinel
names a real server. On a real server it deletes the keys it created when
it ends: they would otherwise stay for up to an hour, the lifetime of the
last fencing token.
An interrupt (Ctrl-C) stops the workers, prints what was measured so far,
and still deletes the keys.

With -metrics it prints, at the end, the OpenTelemetry metrics that
package github.com/dsyncgo/dsync/otel recorded: what a service gets from
observe.Set(backend, otel.New()).`

// demoLeaseDemo is the fixed lease of the lease part of the demo.
const demoLeaseDemo = 300 * time.Millisecond

// demo has workers, each with a backend of its own as separate processes
// would have, contend on one mutex, and reports what happened.
func demo(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "demo", demoDoc+"\n\n"+connUsage(false)+" demo reads no server from the environment.")
	conn := connFlags{optional: true}
	conn.register(fs, "`URL` or host:port of a Redis server to use instead of the embedded one: redis://[user:password@]host:port[/db], rediss:// for TLS")
	workers := fs.Int("workers", 4, "contending workers, each with its own connection pool")
	rounds := fs.Int("rounds", 8, "acquisitions per worker")
	hold := fs.Duration("hold", 2*time.Millisecond, "time spent holding the mutex each round")
	metrics := fs.Bool("metrics", false, "print the OpenTelemetry metrics of the run at the end")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("unexpected arguments %q", pos)
	}
	if *workers < 1 || *rounds < 1 || *hold < 0 {
		return usagef("-workers and -rounds must be positive, -hold not negative")
	}

	srv, err := openServer(ctx, e, &conn)
	if err != nil {
		return err
	}
	defer srv.close()
	var reader *sdkmetric.ManualReader
	if *metrics {
		reader = sdkmetric.NewManualReader()
		srv.observer = dotel.New(dotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	}
	out := &syncWriter{w: e.stdout}
	name := "demo:" + dsync.NewID()[:8]
	fmt.Fprintf(out, "dsync demo on %s\n", srv)
	fmt.Fprintf(out, "%d workers x %d rounds on mutex %q, holding %v each time\n\n", *workers, *rounds, name, *hold)

	// The library rides out an unreachable server for as long as a
	// LockContext may wait; the demo stops at the first warning instead.
	dctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	logger := slog.New(giveUpHandler{stop})

	res := contend(dctx, srv, out, logger, name, *workers, *rounds, *hold)
	res.report(out, *workers**rounds)
	err = res.err
	if err == nil && dctx.Err() == nil {
		err = demoLease(dctx, srv, out, logger, name)
	}
	if ctx.Err() == nil && dctx.Err() != nil {
		err = context.Cause(dctx)
	}
	if !srv.embedded() {
		removeDemoKeys(ctx, srv, out, name, "", ":reentry", ":lease")
	}
	if reader != nil {
		if merr := printMetrics(ctx, out, reader); merr != nil && err == nil {
			err = merr
		}
	}
	switch {
	case ctx.Err() != nil:
		fmt.Fprintln(out, "\ninterrupted: the numbers above cover the acquisitions completed before it")
		return ctx.Err()
	case err != nil:
		return err
	case res.overlaps != 0 || !res.increasing():
		return errors.New("mutual exclusion or token order violated")
	}
	return nil
}

// acquisition is one round of one worker.
type acquisition struct {
	worker, round int
	seq           int64 // order of entry into the critical section
	token         int64
	waited        time.Duration
}

// contention is what the workers of the demo did.
type contention struct {
	log      []acquisition // sorted by seq
	elapsed  time.Duration
	overlaps int32
	err      error // the first failure, not counting the interrupt
}

// contend runs the workers until they are done, one fails, or ctx ends.
// Every worker's client is closed when it returns.
func contend(ctx context.Context, srv *server, out io.Writer, logger *slog.Logger, name string, workers, rounds int, hold time.Duration) contention {
	var (
		mu       sync.Mutex
		log      []acquisition
		inside   atomic.Int32
		overlaps atomic.Int32
		seq      atomic.Int64
		wg       sync.WaitGroup
		failed   = make(chan error, workers)
	)
	start := time.Now()
	for w := 1; w <= workers; w++ {
		c := srv.client()
		defer c.close()
		m := mutex.New(c.b, name, mutex.WithLogger(logger))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 1; r <= rounds && ctx.Err() == nil; r++ {
				// Each round is a job of its own: a fresh owner.
				lctx, cancel := context.WithTimeout(dsync.WithOwner(ctx), time.Minute)
				asked := time.Now()
				if err := m.LockContext(lctx); err != nil {
					cancel()
					if ctx.Err() == nil {
						failed <- fmt.Errorf("worker %d: %w", w, err)
					}
					return
				}
				a := acquisition{worker: w, round: r, waited: time.Since(asked), seq: seq.Add(1)}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				a.token, _ = m.Token(lctx)
				fmt.Fprintf(out, "  worker %d round %d: acquired after %-10v token %d\n", w, r, a.waited.Round(time.Microsecond), a.token)
				sleep(ctx, hold)
				inside.Add(-1)
				// The release runs even after an interrupt.
				err := m.UnlockContext(context.WithoutCancel(lctx))
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
	res := contention{elapsed: time.Since(start), overlaps: overlaps.Load()}
	close(failed)
	for err := range failed {
		res.err = errors.Join(res.err, err)
	}
	slices.SortFunc(log, func(a, b acquisition) int { return int(a.seq - b.seq) })
	res.log = log
	return res
}

// increasing reports whether the tokens increased in acquisition order.
func (c contention) increasing() bool {
	for i := 1; i < len(c.log); i++ {
		if c.log[i].token <= c.log[i-1].token {
			return false
		}
	}
	return true
}

// report prints the summary of the acquisitions made, of planned.
func (c contention) report(out io.Writer, planned int) {
	n := len(c.log)
	if n < planned {
		fmt.Fprintf(out, "\n%d of %d acquisitions in %v\n", n, planned, c.elapsed.Round(time.Millisecond))
	} else {
		fmt.Fprintf(out, "\n%d acquisitions in %v\n", n, c.elapsed.Round(time.Millisecond))
	}
	if n == 0 {
		return
	}
	waits := make([]time.Duration, n)
	for i, a := range c.log {
		waits[i] = a.waited
	}
	slices.Sort(waits)
	pct := func(p float64) time.Duration { return waits[int(p*float64(n-1))].Round(time.Microsecond) }
	fmt.Fprintf(out, "wait: p50 %v, p99 %v, max %v\n", pct(0.5), pct(0.99), waits[n-1].Round(time.Microsecond))
	fmt.Fprintf(out, "overlaps (two holders at once): %d\n", c.overlaps)
	fmt.Fprintf(out, "fencing tokens strictly increasing in acquisition order: %v\n", c.increasing())
}

// demoLease shows re-entry, then a fixed lease running out and the holder
// being told. Nothing here waits for another holder, so every call is
// bounded by the server's timeout.
func demoLease(ctx context.Context, srv *server, out io.Writer, logger *slog.Logger, name string) error {
	c := srv.client()
	defer c.close()
	ctx = dsync.WithOwner(ctx)
	call := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, srv.timeout) }
	release := context.WithoutCancel(ctx) // releases run even after an interrupt

	m := mutex.New(c.b, name+":reentry", mutex.WithLogger(logger))
	held := 0
	defer func() {
		for ; held > 0; held-- {
			m.UnlockContext(release)
		}
	}()
	for i := 0; i < 3; i++ {
		cctx, cancel := call()
		err := m.LockContext(cctx)
		cancel()
		if err != nil {
			return err
		}
		held++
	}
	cctx, cancel := call()
	n, err := m.HoldCount(cctx)
	cancel()
	if err != nil {
		return err
	}
	for ; held > 0; held-- {
		if err := m.UnlockContext(release); err != nil {
			return err
		}
	}
	cctx, cancel = call()
	locked, err := m.IsLocked(cctx)
	cancel()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nre-entry: one owner locked 3 times (hold count %d); after 3 unlocks locked=%v\n", n, locked)

	// The library logs the loss this part provokes: not worth a warning.
	m = mutex.New(c.b, name+":lease", mutex.WithLease(demoLeaseDemo), mutex.WithLogger(nil))
	cctx, cancel = call()
	err = m.LockContext(cctx)
	cancel()
	if err != nil {
		return err
	}
	start := time.Now()
	select {
	case <-m.Done(ctx):
		fmt.Fprintf(out, "fixed %v lease: the holder was told its hold ended after %v\n", demoLeaseDemo, time.Since(start).Round(time.Millisecond))
	case <-ctx.Done():
		m.UnlockContext(release)
		return ctx.Err()
	case <-time.After(5 * time.Second):
		m.UnlockContext(release)
		return errors.New("lost signal did not fire")
	}
	if err := m.UnlockContext(release); errors.Is(err, dsync.ErrNotHeld) {
		fmt.Fprintln(out, "unlocking it afterwards reports:", err)
	}
	return nil
}

// giveUpHandler is the demo's log handler: the first warning of a mutex (a
// server it cannot reach, a hold lost) ends the demo with it as the cause.
type giveUpHandler struct{ stop context.CancelCauseFunc }

func (h giveUpHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h giveUpHandler) Handle(_ context.Context, r slog.Record) error {
	msg := strings.TrimSuffix(strings.TrimPrefix(r.Message, "dsync: "), "; retrying")
	var detail []string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "name" || a.Key == "error" || a.Key == "reason" {
			detail = append(detail, a.Key+"="+a.Value.String())
		}
		return true
	})
	h.stop(fmt.Errorf("%s (%s)", msg, strings.Join(detail, ", ")))
	return nil
}

func (h giveUpHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h giveUpHandler) WithGroup(string) slog.Handler      { return h }

// removeDemoKeys deletes the keys of the demo's mutexes (name plus each
// suffix) and says so: a mutex's fence key keeps the last
// fencing token for FenceTTL (an hour), which a random name no one will
// use again does not need. It runs even after an interrupt.
func removeDemoKeys(ctx context.Context, srv *server, out io.Writer, name string, suffixes ...string) {
	var ks []string
	var groups [][]string // the keys of each lock, which share a hash slot
	for _, s := range suffixes {
		base, err := keys.Base(keys.DefaultPrefix, "mutex", name+s)
		if err != nil {
			fmt.Fprintf(out, "\ncannot name the demo's keys: %v\n", err)
			return
		}
		g := []string{base, base + ":queue", base + ":expiry", base + ":fence"}
		ks, groups = append(ks, g...), append(groups, g)
	}
	lockKeys := names(ks)
	ctx = context.WithoutCancel(ctx)
	c := srv.client()
	defer c.close()
	// Lock by lock: on a cluster, the keys of different locks are on
	// different slots, which one DEL or EXISTS cannot span.
	perLock := func(f func(ctx context.Context, ks ...string) *redis.IntCmd) (int64, error) {
		var sum int64
		for _, g := range groups {
			cctx, cancel := context.WithTimeout(ctx, srv.timeout)
			n, err := f(cctx, g...).Result()
			cancel()
			if err != nil {
				return 0, err
			}
			sum += n
		}
		return sum, nil
	}
	n, err := perLock(c.rc.Del)
	if err != nil {
		fmt.Fprintf(out, "\ncould not remove the demo's keys (%v); those the server has expire within an hour (the fencing token's lifetime):\n", err)
		for _, k := range ks {
			fmt.Fprintf(out, "  %s\n", k)
		}
		return
	}
	var left []string
	exist, err := perLock(c.rc.Exists)
	if err != nil {
		fmt.Fprintf(out, "\nremoved the demo's %d keys from the server (%s and their companions); could not check that none is left: %v\n",
			n, strings.Join(lockKeys, ", "), err)
		return
	}
	if exist == 0 {
		ks = nil
	}
	for _, k := range ks {
		cctx, cancel := context.WithTimeout(ctx, srv.timeout)
		d, err := c.rc.PTTL(cctx, k).Result()
		cancel()
		ttl := d.Milliseconds()
		if d < 0 {
			ttl = int64(d) // go-redis keeps -1 and -2 as they are
		}
		switch {
		case err != nil:
			left = append(left, fmt.Sprintf("%s: unknown (%v)", k, err))
		case ttl >= 0:
			left = append(left, fmt.Sprintf("%s: expires in %v", k, (time.Duration(ttl)*time.Millisecond).Round(time.Second)))
		case ttl == -1:
			left = append(left, fmt.Sprintf("%s: no expiry", k))
		}
	}
	if len(left) == 0 {
		fmt.Fprintf(out, "\nremoved the demo's %d keys from the server (%s and their companions); none is left\n",
			n, strings.Join(lockKeys, ", "))
		return
	}
	fmt.Fprintf(out, "\nremoved %d of the demo's keys from the server; left behind:\n", n)
	for _, l := range left {
		fmt.Fprintf(out, "  %s\n", l)
	}
}

// names returns every third key of ks: the lock keys.
func names(ks []string) []string {
	var s []string
	for i := 0; i < len(ks); i += 3 {
		s = append(s, ks[i])
	}
	return s
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// syncWriter serializes the writes of the demo's workers.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
