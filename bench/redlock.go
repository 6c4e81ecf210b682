package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/go-redsync/redsync/v4"

	"github.com/dsyncgo/dsync"
	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/multilock"
	"github.com/dsyncgo/dsync/mutex"
)

// The RedLock scenario: dsync's multilock.RedLock and redsync's mutex,
// each over one lock per server on the same independent servers (5 by
// default), in one run. Its contenders are goroutines of this process,
// each with pools of its own, as the other implementations' are in-process
// runs: a contender per process would need every process to open a
// connection to every server.

// RedLockImpls are the implementations the RedLock scenario compares.
func RedLockImpls() []Impl {
	return []Impl{
		{Name: "dsync-redlock", Note: "multilock.RedLock over one dsync mutex per server (30s watchdog lease), members tried in parallel, pub/sub wake-ups", New: newDsyncRedLock()},
		{Name: "dsync-redlock-handoff", Note: "the same over mutexes WithHandoffAfter(0): every release with a waiter hands the member over", New: newDsyncRedLock(mutex.WithHandoffAfter(0))},
		{Name: "redsync-redlock", Note: "redsync v4 over the same servers, defaults: 32 tries, 50-250ms random retry delay, 8s expiry", New: newRedsync(nil)},
		{Name: "redsync-redlock-1ms", Note: "redsync v4 over the same servers, 1ms retry delay, tries unlimited in practice", New: newRedsync([]redsync.Option{
			redsync.WithRetryDelay(time.Millisecond), redsync.WithTries(1 << 30)})},
	}
}

// addrs splits the comma-separated addresses a client is given: one
// server, or the RedLock scenario's several.
func addrs(addr string) []string { return strings.Split(addr, ",") }

type dsyncRedLockClient struct {
	l     *multilock.Lock
	close []func()
}

func newDsyncRedLock(opts ...mutex.Option) func(addr, name string, c *counter) Client {
	return func(addr, name string, c *counter) Client {
		d := &dsyncRedLockClient{}
		var ms []dsync.Locker
		for _, a := range addrs(addr) {
			pool := redigoPool(a, c)
			b := bredigo.New(pool)
			ms = append(ms, mutex.New(b, name, opts...))
			d.close = append(d.close, func() { b.Close(); pool.Close() })
		}
		d.l = multilock.RedLock(ms...)
		return d
	}
}

// Lock and Unlock take and release ownerless holds, as the other clients
// do: the group remembers the owner it started.
func (d *dsyncRedLockClient) Lock(ctx context.Context) error   { return d.l.LockContext(ctx) }
func (d *dsyncRedLockClient) Unlock(ctx context.Context) error { return d.l.UnlockContext(ctx) }

func (d *dsyncRedLockClient) Close() {
	for _, f := range d.close {
		f()
	}
}

// RedLockResult is the RedLock scenario of one implementation.
type RedLockResult struct {
	Uncont Result // uncontended lock+unlock
	Cont   Result // contenders at Hold
}

// RedLockRun measures impl over the servers at addrs: uncontended
// cycles, then contenders at hold for duration, in-process.
func RedLockRun(ctx context.Context, addrs []string, impl Impl, uncontended, contenders int, hold, duration time.Duration) (RedLockResult, error) {
	addr := strings.Join(addrs, ",")
	var res RedLockResult
	var c counter
	cl := impl.New(addr, name("redlock-uncontended"), &c)
	defer cl.Close()
	for i := 0; i < 20; i++ {
		if err := cycle(ctx, cl, 0); err != nil {
			return res, err
		}
	}
	start := time.Now()
	for i := 0; i < uncontended; i++ {
		if err := cycle(ctx, cl, 0); err != nil {
			return res, err
		}
	}
	res.Uncont = Result{Impl: impl.Name, Acquisitions: int64(uncontended), Elapsed: time.Since(start)}

	lockName := name("redlock-contended")
	clients := make([]Client, contenders)
	for i := range clients {
		clients[i] = impl.New(addr, lockName, &c)
		defer clients[i].Close()
		if err := cycle(ctx, clients[i], 0); err != nil {
			return res, err
		}
	}
	l := newLoop(hold, duration, 0)
	waits, giveUps, err := l.runAll(ctx, clients)()
	if err != nil {
		return res, err
	}
	res.Cont = Result{Impl: impl.Name, Acquisitions: l.acquired.Load(), Elapsed: l.elapsed(), Waits: waits, GiveUps: giveUps}
	return res, nil
}

// writeRedLock prints the RedLock scenario, if it ran.
func (r *Report) writeRedLock(w io.Writer) {
	if len(r.RedLock) == 0 {
		return
	}
	fmt.Fprintf(w, "\nRedLock over %d independent servers: uncontended lock+unlock, then %d contenders (goroutines), %v hold, %d interleaved rounds\n",
		len(r.Config.RedLockAddrs), r.Config.Contenders, r.Config.Hold, redLockRounds)
	names := []string{}
	for _, impl := range RedLockImpls() {
		if _, ok := r.RedLock[impl.Name]; ok {
			names = append(names, impl.Name)
		}
	}
	fmt.Fprintf(w, "%22s", "")
	for _, n := range names {
		fmt.Fprintf(w, "  %21s", n)
	}
	fmt.Fprintln(w)
	row := func(label string, f func(RedLockResult) string) {
		fmt.Fprintf(w, "%22s", label)
		for _, n := range names {
			fmt.Fprintf(w, "  %21s", f(r.RedLock[n]))
		}
		fmt.Fprintln(w)
	}
	row("uncontended time/op", func(x RedLockResult) string {
		return us(x.Uncont.Elapsed / time.Duration(max(1, x.Uncont.Acquisitions)))
	})
	row("acquisitions/s", func(x RedLockResult) string { return fmt.Sprintf("%.0f", x.Cont.Rate()) })
	row("wait p50", func(x RedLockResult) string { return us(percentile(x.Cont.Waits, 0.50)) })
	row("wait p99", func(x RedLockResult) string { return us(percentile(x.Cont.Waits, 0.99)) })
	row("wait max", func(x RedLockResult) string { return us(percentile(x.Cont.Waits, 1)) })
	row("give-ups", func(x RedLockResult) string { return fmt.Sprint(x.Cont.GiveUps) })
	for _, impl := range RedLockImpls() {
		if slices.Contains(names, impl.Name) {
			fmt.Fprintf(w, "  %-21s %s\n", impl.Name, impl.Note)
		}
	}
}

// redLockRounds is how many interleaved rounds the RedLock scenario is
// split into.
const redLockRounds = 4
