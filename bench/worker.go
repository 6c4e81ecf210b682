package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"time"

	"github.com/dsyncgo/dsync/internal/wait"
)

// Spawn returns a command that runs Worker on its standard input and
// output: the same program, started in a mode that does only that.
// Contended starts one per contender, Handoff one for its waiter and Ring
// one per member, so that each runs in a process of its own, as the clients of a shared lock
// usually do. dsync's queueing within a process (see the mutex package's
// "Waiting") then plays no part.
type Spawn func() *exec.Cmd

// job is what a worker is asked to do: contend (see Contended), be the
// waiter of a handoff (see Handoff), or be a member of a ring (see Ring).
type job struct {
	Handoff bool
	Ring    bool
	Index   int // of the ring member
	Members int // in the ring
	Impl    string
	Addr    string
	Name    string
	Hold    time.Duration
	Limit   int64 // acquisitions, 0 for none
}

// step is a handoff waiter's instruction: lock, then report when the lock
// was acquired; or unlock.
type step struct {
	Unlock bool
}

// stepDone reports a step: for a lock, when it was acquired, by the wall
// clock, which the parent shares.
type stepDone struct {
	At     int64 // Unix ns
	GaveUp bool
	Err    string
}

// begin starts the run of every worker at once, after all have warmed up.
type begin struct {
	Duration time.Duration // 0 for none
	Deadline time.Time     // a ring's end, the same for every member
}

// workerReport is what a worker measured.
type workerReport struct {
	Ready      bool // sent alone, once warmed up
	Acquired   int64
	Waits      []time.Duration
	GiveUps    int64
	Commands   int64
	RoundTrips int64
	HandOffs   int64 // made by the worker's releases
	Goroutines int   // in the worker, mid-run
	Err        string
}

// Worker runs one contender of a parent's Contended, the waiter of its
// Handoff, or one member of its Ring: it reads its job from in, warms up,
// reports ready on out, runs when told to, and writes what it measured to
// out.
func Worker(ctx context.Context, in io.Reader, out io.Writer) error {
	dec, enc := json.NewDecoder(bufio.NewReader(in)), json.NewEncoder(out)
	var j job
	if err := dec.Decode(&j); err != nil {
		return fmt.Errorf("worker: read job: %w", err)
	}
	rep := runWorker(ctx, j, dec, enc)
	return enc.Encode(rep)
}

func runWorker(ctx context.Context, j job, dec *json.Decoder, enc *json.Encoder) workerReport {
	fail := func(err error) workerReport { return workerReport{Err: err.Error()} }
	if j.Ring {
		return ringWorker(ctx, j, dec, enc)
	}
	impl, ok := lookupImpl(j.Impl)
	if !ok {
		return fail(fmt.Errorf("worker: no implementation %q", j.Impl))
	}
	var c counter
	cl := impl.New(j.Addr, j.Name, &c)
	defer cl.Close()
	if err := cycle(ctx, cl, 0); err != nil { // warm up
		return fail(err)
	}
	if err := enc.Encode(workerReport{Ready: true}); err != nil {
		return fail(err)
	}
	if j.Handoff {
		return handoffWaiter(ctx, cl, dec, enc)
	}
	var b begin
	if err := dec.Decode(&b); err != nil {
		return fail(fmt.Errorf("worker: read begin: %w", err))
	}
	cmds, rtts, handOffs := c.commands.Load(), c.roundTrips.Load(), c.handOffs.Load()
	l := newLoop(j.Hold, b.Duration, j.Limit)
	done := make(chan workerReport, 1)
	go func() {
		w, g, err := l.run(ctx, cl)
		r := workerReport{Waits: w, GiveUps: g}
		if err != nil {
			r.Err = err.Error()
		}
		done <- r
	}()
	goroutines := 0
	if wait.Sleep(ctx, l.sample()) {
		goroutines = runtime.NumGoroutine()
	}
	l.wait(ctx)
	// Hand-offs count until the deadline, as acquisitions do.
	handedOff := c.handOffs.Load() - handOffs
	r := <-done
	r.Acquired = l.acquired.Load()
	r.Commands, r.RoundTrips = c.commands.Load()-cmds, c.roundTrips.Load()-rtts
	r.HandOffs = handedOff
	r.Goroutines = goroutines
	return r
}

// ringWorker runs member j.Index of a ring: it reports the number of times
// it held the token as its acquisitions.
func ringWorker(ctx context.Context, j job, dec *json.Decoder, enc *json.Encoder) workerReport {
	m, err := joinRing(ctx, j.Addr, j.Name, j.Index, j.Members)
	if err != nil {
		return workerReport{Err: err.Error()}
	}
	defer m.close()
	if err := enc.Encode(workerReport{Ready: true}); err != nil {
		return workerReport{Err: err.Error()}
	}
	var b begin
	if err := dec.Decode(&b); err != nil {
		return workerReport{Err: fmt.Sprintf("worker: read begin: %v", err)}
	}
	n, err := m.run(j.Hold, b.Deadline)
	r := workerReport{Acquired: n}
	if err != nil {
		r.Err = err.Error()
	}
	return r
}

// proc is a running worker process.
type proc struct {
	cmd   *exec.Cmd
	stdin io.Closer
	enc   *json.Encoder
	dec   *json.Decoder
}

// startProc starts a worker on job j, and waits until it has warmed up.
func startProc(spawn Spawn, j job) (*proc, error) {
	cmd := spawn()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start worker: %w", err)
	}
	p := &proc{cmd: cmd, stdin: stdin, enc: json.NewEncoder(stdin), dec: json.NewDecoder(stdout)}
	var ready workerReport
	if err := p.enc.Encode(j); err != nil {
		p.close()
		return nil, fmt.Errorf("worker: %w", err)
	}
	if err := p.dec.Decode(&ready); err != nil || !ready.Ready {
		p.close()
		return nil, fmt.Errorf("worker not ready: %v%s", err, ready.Err)
	}
	return p, nil
}

// close ends the input of the worker, which then exits; one that does not
// within 5s is killed.
func (p *proc) close() {
	p.stdin.Close()
	exited := make(chan struct{})
	go func() { p.cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-exited
	}
}

// A crew is the workers of one run, started together.
type crew []*proc

// startCrew starts n workers, worker i on job(i), each warmed up. On
// failure the ones started are closed.
func startCrew(spawn Spawn, n int, job func(i int) job) (crew, error) {
	c := make(crew, 0, n)
	for i := range n {
		p, err := startProc(spawn, job(i))
		if err != nil {
			c.close()
			return nil, err
		}
		c = append(c, p)
	}
	return c, nil
}

// begin tells every worker to run.
func (c crew) begin(b begin) error {
	for _, p := range c {
		if err := p.enc.Encode(b); err != nil {
			return fmt.Errorf("worker: %w", err)
		}
	}
	return nil
}

// reports waits for every worker's report. The errors the workers
// reported are joined into the error.
func (c crew) reports() ([]workerReport, error) {
	rs := make([]workerReport, len(c))
	var errs error
	for i, p := range c {
		if err := p.dec.Decode(&rs[i]); err != nil {
			return nil, fmt.Errorf("worker: %w", err)
		}
		if rs[i].Err != "" {
			errs = errors.Join(errs, errors.New(rs[i].Err))
		}
	}
	return rs, errs
}

func (c crew) close() {
	for _, p := range c {
		p.close()
	}
}

// contendedProcs is Contended with each contender in a process of its own.
func contendedProcs(ctx context.Context, addr string, impl Impl, contenders int, hold, duration time.Duration, limit int64, spawn Spawn) (Result, error) {
	j := job{Impl: impl.Name, Addr: addr, Name: name("contended"), Hold: hold, Limit: limit}
	workers, err := startCrew(spawn, contenders, func(int) job { return j })
	if err != nil {
		return Result{}, err
	}
	defer workers.close()
	ad := admin{addr}
	var none counter // the workers count their commands
	m, err := startMeter(ad, &none)
	if err != nil {
		return Result{}, err
	}
	l := newLoop(hold, duration, 0)
	if err := workers.begin(begin{Duration: duration}); err != nil {
		return Result{}, err
	}
	pubsub := 0
	if wait.Sleep(ctx, l.sample()) {
		pubsub = ad.pubsubConns()
	}
	rs, err := workers.reports()
	if err != nil {
		return Result{}, err
	}
	res := Result{Impl: impl.Name, PubSubConns: pubsub}
	for _, r := range rs {
		res.Acquisitions += r.Acquired
		res.Waits = append(res.Waits, r.Waits...)
		res.GiveUps += r.GiveUps
		res.Commands += r.Commands
		res.RoundTrips += r.RoundTrips
		res.HandOffs += r.HandOffs
		res.Goroutines += r.Goroutines
	}
	res.Elapsed = l.elapsed()
	res.Waits = sorted(res.Waits)
	_, _, res.ServerCalls, err = m.stop()
	return res, err
}

// handoffWaiter runs the steps of a handoff's waiter until its parent
// closes the input.
func handoffWaiter(ctx context.Context, cl Client, dec *json.Decoder, enc *json.Encoder) workerReport {
	for {
		var st step
		if err := dec.Decode(&st); err == io.EOF {
			return workerReport{}
		} else if err != nil {
			return workerReport{Err: err.Error()}
		}
		var d stepDone
		var err error
		if st.Unlock {
			err = cl.Unlock(ctx)
		} else {
			err = cl.Lock(ctx)
			d.At = time.Now().UnixNano()
			if errors.Is(err, ErrGaveUp) {
				d.GaveUp, err = true, nil
			}
		}
		if err != nil {
			d.Err = err.Error()
		}
		if err := enc.Encode(d); err != nil {
			return workerReport{Err: err.Error()}
		}
	}
}

// remote is a Client whose Lock and Unlock run in a worker process (see
// handoffWaiter).
type remote struct {
	p  *proc
	at time.Time // when the last Lock acquired, by the worker's clock
}

func (r *remote) do(st step) error {
	if err := r.p.enc.Encode(st); err != nil {
		return err
	}
	var d stepDone
	if err := r.p.dec.Decode(&d); err != nil {
		return err
	}
	r.at = time.Unix(0, d.At)
	switch {
	case d.GaveUp:
		return ErrGaveUp
	case d.Err != "":
		return errors.New(d.Err)
	}
	return nil
}

func (r *remote) Lock(ctx context.Context) error   { return r.do(step{}) }
func (r *remote) Unlock(ctx context.Context) error { return r.do(step{Unlock: true}) }
func (r *remote) Close()                           { r.p.close() }

// AcquiredAt returns when the last Lock acquired, in the worker: the
// parent learns it only a pipe's hop later.
func (r *remote) AcquiredAt() time.Time { return r.at }
