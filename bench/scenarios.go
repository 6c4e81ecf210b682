package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/wait"
)

// Result is what one scenario measured for one implementation.
type Result struct {
	Impl         string
	Acquisitions int64
	Elapsed      time.Duration
	Waits        []time.Duration // sorted: first Lock call to acquisition, give-ups included
	GiveUps      int64           // Lock calls that stopped trying
	Commands     int64           // sent by the clients
	RoundTrips   int64           // commands whose reply the client awaited
	ServerCalls  int64           // INFO commandstats delta, script calls included
	HandOffs     int64           // dsync: acquisitions handed over by a release (see handOffObserver)
	PubSubConns  int             // on the server, sampled mid-run
	Goroutines   int             // in this process, sampled mid-run
	PerOp        []time.Duration // sorted: time per cycle of each interleaved round
	Rounds       []time.Duration // the same, in the order of the rounds
	IdlePings    []time.Duration // sorted: a PING after the same idle time (handoff)
	// WaitCycles are the waits in cycles of their own round (its Elapsed
	// over its Acquisitions), sorted: measures of queueing that the
	// machine's drift from round to round does not widen. Those of a round
	// that acquired nothing are +Inf.
	WaitCycles []float64
}

// add accumulates another round of the same scenario into r: counts add
// up, waits pool, sampled gauges keep their maximum, and each round's time
// per cycle is kept for the median.
func (r *Result) add(o Result) {
	r.Impl = o.Impl
	r.Acquisitions += o.Acquisitions
	r.Elapsed += o.Elapsed
	r.Commands += o.Commands
	r.RoundTrips += o.RoundTrips
	r.ServerCalls += o.ServerCalls
	r.HandOffs += o.HandOffs
	r.GiveUps += o.GiveUps
	r.Waits = sorted(append(r.Waits, o.Waits...))
	r.IdlePings = sorted(append(r.IdlePings, o.IdlePings...))
	r.PubSubConns = max(r.PubSubConns, o.PubSubConns)
	r.Goroutines = max(r.Goroutines, o.Goroutines)
	cycles := slices.Clone(r.WaitCycles)
	if o.Acquisitions > 0 {
		per := o.Elapsed / time.Duration(o.Acquisitions)
		r.PerOp = sorted(append(r.PerOp, per))
		r.Rounds = append(r.Rounds, per)
		for _, w := range o.Waits {
			cycles = append(cycles, float64(w)/float64(per))
		}
	} else {
		// A round that acquired nothing has no cycle: its waits, cut at
		// its end, are past any number of cycles, not left out.
		for range o.Waits {
			cycles = append(cycles, math.Inf(1))
		}
	}
	slices.Sort(cycles)
	r.WaitCycles = cycles
}

// pairedRatio returns the median, over the interleaved rounds both ran,
// of a's time per cycle over b's in the same round (see pairedMedian).
func pairedRatio(a, b Result) float64 { return pairedMedian(a.Rounds, b.Rounds) }

// pairedMedian returns the median, over the rounds both ran, of a's figure
// over b's in the same round: on a machine that drifts between fast and
// slow spells, each round compares the two under the same conditions.
// It is 0 when they share no round.
func pairedMedian(a, b []time.Duration) float64 {
	n := min(len(a), len(b))
	if n == 0 {
		return 0
	}
	rs := make([]float64, n)
	for i := range rs {
		rs[i] = float64(a[i]) / float64(max(1, b[i]))
	}
	slices.Sort(rs)
	if n%2 == 1 {
		return rs[n/2]
	}
	return (rs[n/2-1] + rs[n/2]) / 2
}

// PerAcq returns n per successful acquisition.
func (r Result) PerAcq(n int64) float64 {
	if r.Acquisitions == 0 {
		return 0
	}
	return float64(n) / float64(r.Acquisitions)
}

// Rate returns acquisitions per second.
func (r Result) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Acquisitions) / r.Elapsed.Seconds()
}

// name returns a lock name of its own for one run.
func name(scenario string) string { return "bench:" + scenario + ":" + dsync.NewID()[:8] }

// Uncontended locks and unlocks n times from one client, alone.
func Uncontended(ctx context.Context, addr string, impl Impl, n int) (Result, error) {
	var c counter
	cl := impl.New(addr, name("uncontended"), &c)
	defer cl.Close()
	for i := 0; i < 20; i++ { // load scripts, fill the pool
		if err := cycle(ctx, cl, 0); err != nil {
			return Result{}, err
		}
	}
	m, err := startMeter(admin{addr}, &c)
	if err != nil {
		return Result{}, err
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		if err := cycle(ctx, cl, 0); err != nil {
			return Result{}, err
		}
	}
	r := Result{Impl: impl.Name, Acquisitions: int64(n), Elapsed: time.Since(start)}
	r.Commands, r.RoundTrips, r.ServerCalls, err = m.stop()
	return r, err
}

func cycle(ctx context.Context, cl Client, hold time.Duration) error {
	if err := cl.Lock(ctx); err != nil {
		return err
	}
	if hold > 0 {
		time.Sleep(hold)
	}
	return cl.Unlock(ctx)
}

// Contended has contenders lock, hold and unlock one name in a loop, until
// acquisitions reach limit (if > 0) or duration has passed (if > 0). A
// Lock that gives up counts as a give-up and the contender tries again.
// With spawn nil the contenders are goroutines of this process, sharing
// one client if impl has Impl.Shared and each with a client of its own
// otherwise; else each runs in a process of its own that spawn starts
// (see Worker), and limit applies to each.
func Contended(ctx context.Context, addr string, impl Impl, contenders int, hold, duration time.Duration, limit int64, spawn Spawn) (Result, error) {
	if spawn != nil {
		return contendedProcs(ctx, addr, impl, contenders, hold, duration, limit, spawn)
	}
	var c counter
	lockName := name("contended")
	newClient := func(lock string) Client { return impl.New(addr, lock, &c) }
	if impl.Shared != nil {
		var closeAll func()
		newClient, closeAll = impl.Shared(addr, &c)
		defer closeAll() // after the clients' Close, deferred below
	}
	clients := make([]Client, contenders)
	for i := range clients {
		clients[i] = newClient(lockName)
		defer clients[i].Close()
		if err := cycle(ctx, clients[i], 0); err != nil { // warm up
			return Result{}, err
		}
	}
	ad := admin{addr}
	m, err := startMeter(ad, &c)
	if err != nil {
		return Result{}, err
	}

	l := newLoop(hold, duration, limit)
	finish := l.runAll(ctx, clients)
	var pubsub, goroutines int
	if wait.Sleep(ctx, l.sample()) {
		pubsub, goroutines = ad.pubsubConns(), runtime.NumGoroutine()
	}
	// Hand-offs count until the deadline, as acquisitions do: the
	// releases after it hand over to acquisitions that do not count.
	l.wait(ctx)
	handOffs := m.handOffsSince()
	waits, giveUps, err := finish()
	if err != nil {
		return Result{}, err
	}
	r := Result{
		Impl:         impl.Name,
		Acquisitions: l.acquired.Load(),
		Elapsed:      l.elapsed(),
		Waits:        waits,
		GiveUps:      giveUps,
		PubSubConns:  pubsub,
		Goroutines:   goroutines,
		HandOffs:     handOffs,
	}
	r.Commands, r.RoundTrips, r.ServerCalls, err = m.stop()
	return r, err
}

// loop is one contended run as its contenders share it: when it ends, and
// what it counted.
type loop struct {
	hold     time.Duration
	duration time.Duration
	limit    int64
	start    time.Time
	deadline time.Time // acquisitions completed after it do not count
	stop     atomic.Bool
	acquired atomic.Int64
}

// newLoop starts the clock of a run.
func newLoop(hold, duration time.Duration, limit int64) *loop {
	l := &loop{hold: hold, duration: duration, limit: limit, start: time.Now()}
	if duration > 0 {
		l.deadline = l.start.Add(duration)
	}
	return l
}

// sample is when gauges are read: mid-run.
func (l *loop) sample() time.Duration {
	if l.duration <= 0 {
		return 50 * time.Millisecond
	}
	return l.duration / 2
}

// wait ends a timed run at its deadline.
func (l *loop) wait(ctx context.Context) {
	if l.duration > 0 {
		wait.Sleep(ctx, time.Until(l.deadline))
		l.stop.Store(true)
	}
}

// elapsed is the run's length: the rate counts what completed within it;
// contenders still inside Lock when it ended only finish their wait.
func (l *loop) elapsed() time.Duration {
	if l.duration > 0 {
		return l.duration
	}
	return time.Since(l.start)
}

// runAll starts a contender per client. Its finish ends the run (at the
// deadline of a timed one) and returns every contender's waits, sorted,
// their give-ups, and their errors.
func (l *loop) runAll(ctx context.Context, clients []Client) (finish func() ([]time.Duration, int64, error)) {
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		waits    []time.Duration
		giveUps  int64
		firstErr error
	)
	for _, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, g, err := l.run(ctx, cl)
			mu.Lock()
			defer mu.Unlock()
			waits, giveUps = append(waits, w...), giveUps+g
			firstErr = errors.Join(firstErr, err)
		}()
	}
	return func() ([]time.Duration, int64, error) {
		l.wait(ctx)
		wg.Wait()
		return sorted(waits), giveUps, firstErr
	}
}

// run is one contender's loop. It returns the contender's waits, from its
// first Lock call to the acquisition (a peer's give-up and retry is one
// wait, not two), and its give-ups. A wait that the end of a timed run
// cuts short counts for what it lasted until then: leaving it out would
// hide the contenders that never got the lock. An error stops the whole
// run.
func (l *loop) run(ctx context.Context, cl Client) (waits []time.Duration, giveUps int64, err error) {
	var since time.Time
	defer func() {
		if !since.IsZero() && since.Before(l.deadline) {
			waits = append(waits, l.deadline.Sub(since))
		}
	}()
	for !l.stop.Load() {
		if since.IsZero() {
			since = time.Now()
		}
		err := cl.Lock(ctx)
		at := time.Now()
		if errors.Is(err, ErrGaveUp) {
			giveUps++
			continue
		}
		if err != nil {
			l.stop.Store(true)
			return waits, giveUps, err
		}
		if l.deadline.IsZero() || at.Before(l.deadline) {
			waits = append(waits, at.Sub(since))
			if n := l.acquired.Add(1); l.limit > 0 && n >= l.limit {
				l.stop.Store(true)
			}
			since = time.Time{}
		}
		if l.hold > 0 {
			time.Sleep(l.hold)
		}
		if err := cl.Unlock(ctx); err != nil {
			l.stop.Store(true)
			return waits, giveUps, fmt.Errorf("unlock: %w", err)
		}
	}
	return waits, giveUps, nil
}

// handoffIdle is how long the holder holds in a handoff round, with the
// waiter parked: the client processes and the server are idle meanwhile.
const handoffIdle = 20 * time.Millisecond

// Handoff measures, rounds times, the time from the holder's Unlock call
// to the moment a parked waiter's Lock returns. Each round also times a
// PING sent after the same idle time, on a connection of its own: the
// round trip in the conditions of the handoff, which starts from idle.
//
// With spawn nil the waiter is a client in this process; otherwise it runs
// in a process of its own (see Worker), and reports when it acquired by
// the wall clock, which both processes read.
func Handoff(ctx context.Context, addr string, impl Impl, rounds int, spawn Spawn) (Result, error) {
	var c counter
	lockName := name("handoff")
	holder := impl.New(addr, lockName, &c)
	defer holder.Close()
	var waiter Client
	if spawn == nil {
		waiter = impl.New(addr, lockName, &c)
	} else {
		p, err := startProc(spawn, job{Handoff: true, Impl: impl.Name, Addr: addr, Name: lockName})
		if err != nil {
			return Result{}, err
		}
		waiter = &remote{p: p}
	}
	defer waiter.Close()
	for _, cl := range []Client{holder, waiter} {
		if err := cycle(ctx, cl, 0); err != nil {
			return Result{}, err
		}
	}
	ping, err := redis.DialContext(ctx, "tcp", addr)
	if err != nil {
		return Result{}, err
	}
	defer ping.Close()
	r := Result{Impl: impl.Name}
	for i := 0; i < rounds; i++ {
		if err := holder.Lock(ctx); err != nil {
			return Result{}, err
		}
		got := make(chan error, 1)
		var at time.Time
		go func() {
			err := waiter.Lock(ctx)
			at = time.Now()
			if r, ok := waiter.(*remote); ok {
				at = r.AcquiredAt()
			}
			got <- err
		}()
		time.Sleep(handoffIdle) // the waiter is parked
		// A remote waiter's time has no monotonic reading: Sub then
		// compares wall clocks, which the two processes share.
		released := time.Now()
		if err := holder.Unlock(ctx); err != nil {
			return Result{}, err
		}
		if err := <-got; errors.Is(err, ErrGaveUp) {
			r.GiveUps++
			continue
		} else if err != nil {
			return Result{}, err
		}
		r.Waits = append(r.Waits, at.Sub(released))
		r.Acquisitions++
		if err := waiter.Unlock(ctx); err != nil {
			return Result{}, err
		}
		time.Sleep(handoffIdle)
		start := time.Now()
		if _, err := ping.Do("PING"); err != nil {
			return Result{}, err
		}
		r.IdlePings = append(r.IdlePings, time.Since(start))
	}
	r.Waits = sorted(r.Waits)
	r.IdlePings = sorted(r.IdlePings)
	return r, nil
}
