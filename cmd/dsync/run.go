package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"time"

	"github.com/dsyncgo/dsync/internal/keys"
)

// run's exit statuses of its own; otherwise it exits with the command's.
// They follow timeout(1) and the shells: 124 for a wait that ran out, 125
// for the tool's own failure, 126 and 127 for a command that cannot run.
const (
	exitLost        = 123 // the lock was lost while the command ran
	exitNotAcquired = 124 // the lock was not acquired within -wait
	exitRunFailed   = 125 // run failed before the command started
	exitCannotRun   = 126 // the command was found but could not be started
	exitNotFound    = 127 // the command was not found
)

const runDoc = `run takes the mutex called name, runs the command while it holds it, and
releases it when the command ends: a job that must not run twice at once
runs on one machine at a time, as with consul lock and etcdctl lock.

With -elect, run campaigns in the election called name instead (package
election) and runs the command while it leads; the candidates lead in the
order they asked, and observers (dsync inspect -kind election, or
Observe) see -value (host:pid by default) as the leader's. When the
command ends, run resigns, which hands leadership to the next candidate at
once. Everything below about the lock holds of the term: its token is
DSYNC_TOKEN, and it is lost as a lock is.

The command gets run's standard input, output and error, and two
variables in its environment: DSYNC_NAME, the lock's name, and
DSYNC_TOKEN, the hold's fencing token, which is higher for every hold of
the name. It runs in a process group of its own, so that a signal reaches
everything it started; it is therefore not the terminal's foreground job.
SIGINT, SIGTERM and SIGHUP sent to run are passed on to that group, and
run waits for the command to end. What the command leaves running in its
group when it exits (a shell's background jobs) gets SIGTERM, then
SIGKILL -grace later: run releases the lock only once the group is gone,
so that nothing the command started works on without it, and then exits
with the command's status. (A process that left the group, with setsid or
setpgid, is beyond run's reach.)

The hold has a lease of -lease, renewed every third of it while the
command runs: if run dies, the lock is free again within the lease, and
on Linux the command's process is killed with it (what it started is
not). If the lock is lost while the
command runs (the server lost or deleted it, it was force-unlocked, or
renewals failed until the lease ran out), run says so on standard error
and sends the command's group SIGTERM, then SIGKILL -grace later whether
the command itself has exited by then or not, and exits once the group is
gone. Until the group has stopped, the next holder may already be at work: a
resource that matters should be written with $DSYNC_TOKEN and reject a
token lower than the highest it has seen.

run waits for the lock as long as it takes, unless -wait bounds the wait
(-wait 0 makes a single attempt, which with -elect leads only if nobody
leads or waits). A signal that arrives while it waits
ends it without running the command. Flags may follow the name; the
command starts at "--" or at the first argument after the name that is
not a flag.

Exit status:
  the command's  the command ran and ended; 128+N if signal N killed it
  2              usage error; nothing ran
  123            the lock was lost while the command ran, and the command's
                 process group was stopped
  124            the lock was not acquired within -wait; the command did
                 not run
  125            run failed before the command started (server
                 unreachable, credentials or TLS refused, a lock error);
                 the command did not run
  126            the command could not be started
  127            the command was not found
  128+N          signal N arrived while run waited for the lock; the
                 command did not run
A command that exits with one of these statuses itself is told apart by
run's message on standard error, which comes with every status of its own.`

// defaultValue is -value: host:pid, which tells observers where the
// leader runs.
func defaultValue() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}

// waitFlag is -wait: a duration, negative for forever.
type waitFlag time.Duration

func (w *waitFlag) String() string {
	if *w < 0 {
		return "forever"
	}
	return time.Duration(*w).String()
}

func (w *waitFlag) Set(s string) error {
	if s == "forever" {
		*w = -1
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return errors.New("want a duration of 0 or more, or forever")
	}
	*w = waitFlag(d)
	return nil
}

// runFlags are run's settings.
type runFlags struct {
	conn   connFlags
	prefix string
	lease  time.Duration
	wait   waitFlag
	grace  time.Duration
	elect  bool   // campaign in an election instead of taking a mutex
	value  string // the candidate's value, with elect
}

// runLocked runs a command while holding a lock.
func runLocked(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "run", runDoc+"\n\n"+connUsage(true)+" Else it is localhost:6379.")
	f := runFlags{wait: -1}
	f.conn = connFlags{env: true, fallback: "localhost:6379"}
	f.conn.register(fs, envHelp("localhost:6379"))
	fs.StringVar(&f.prefix, "prefix", keys.DefaultPrefix, "key `prefix` of the lock")
	fs.DurationVar(&f.lease, "lease", 30*time.Second, "the hold's lease, renewed every third of it: how long the lock outlives a dsync run that died")
	fs.Var(&f.wait, "wait", "give up if the lock is not acquired within this `duration`; 0 makes one attempt")
	fs.DurationVar(&f.grace, "grace", 10*time.Second, "time between SIGTERM and SIGKILL to the command's process group, when the lock is lost or the command exits leaving processes in it")
	fs.BoolVar(&f.elect, "elect", false, "campaign in the election called name, and run the command while leading, instead of taking the mutex")
	fs.StringVar(&f.value, "value", defaultValue(), "with -elect, the leader's `value` that observers see")
	name, command, err := parseRun(fs, args)
	if err != nil {
		return err
	}
	switch {
	case f.lease <= 0:
		return usagef("-lease must be positive")
	case f.grace < 0:
		return usagef("-grace must not be negative")
	}
	if _, err := keys.Base(f.prefix, kindMutex, name); err != nil {
		return usagef("%v", err)
	}
	if _, err := f.conn.target(); err != nil {
		return err
	}
	path, err := exec.LookPath(command[0])
	if err != nil {
		return &exitError{commandStatus(err), err}
	}

	// From here on a signal is run's to handle: while it waits for the
	// lock, one ends it; while the command runs, each is passed on. SIGINT
	// also cancels ctx (see function run); it is taken from sigs alone, so
	// that the command does not get it twice.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	ctx = context.WithoutCancel(ctx)

	srv, err := openServer(ctx, e, &f.conn)
	if err != nil {
		return &exitError{exitRunFailed, err}
	}
	defer srv.close()
	c := srv.client()
	defer c.close()
	// The library's warnings (a server unreachable, a hold lost), without
	// the time: run's own messages have none.
	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{
		Level: slog.LevelWarn,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{}
			}
			return a
		},
	}))
	cl := newClaim(c.b, name, f, logger)

	h, err := acquireOrSignal(ctx, e, cl, f, sigs)
	if err != nil {
		return err
	}
	select {
	case <-h.done():
		return &exitError{exitLost, fmt.Errorf("%s was lost before the command started; it did not run", cl)}
	default:
	}

	cmd := exec.Command(path, command[1:]...)
	cmd.Args[0] = command[0]
	cmd.Env = append(os.Environ(), "DSYNC_NAME="+name, "DSYNC_TOKEN="+strconv.FormatInt(h.token(), 10))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = e.stdin, e.stdout, e.stderr
	ch, err := startChild(cmd)
	if err != nil {
		releaseHold(e, cl, h, f.conn.timeout)
		return &exitError{commandStatus(err), err}
	}
	return supervise(e, cl, h, ch, sigs, f)
}

// parseRun parses run's arguments: flags, the name, perhaps more flags,
// then the command, after "--" or from the first argument that is not a
// flag.
func parseRun(fs *flagSet, args []string) (name string, command []string, err error) {
	rest, err := fs.parseFlags(args)
	if err != nil {
		return "", nil, err
	}
	if len(rest) == 0 {
		return "", nil, usagef("want a lock name and a command")
	}
	name = rest[0]
	if command, err = fs.parseFlags(rest[1:]); err != nil {
		return "", nil, err
	}
	if len(command) == 0 {
		return "", nil, usagef("want a command after the lock name")
	}
	return name, command, nil
}

// commandStatus is the status of a command that could not be started
// because of err, as a shell reports it.
func commandStatus(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return exitNotFound
	}
	return exitCannotRun
}

// acquireOrSignal acquires cl within -wait, unless one of sigs arrives
// first. Every failure is an *exitError with run's status for it.
func acquireOrSignal(ctx context.Context, e *env, cl claim, f runFlags, sigs <-chan os.Signal) (hold, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		h   hold
		err error
	}
	acquired := make(chan result, 1)
	go func() {
		h, err := cl.acquire(ctx, time.Duration(f.wait))
		acquired <- result{h, err}
	}()
	var r result
	select {
	case r = <-acquired:
	case sig := <-sigs:
		cancel()
		if r = <-acquired; r.err == nil {
			// Acquired as the signal came: give it back.
			releaseHold(e, cl, r.h, f.conn.timeout)
		}
		return nil, &exitError{signalStatus(sig), fmt.Errorf("%s while waiting for %s; the command did not run", signalName(sig), cl)}
	}
	switch {
	case r.err == nil:
		return r.h, nil
	case errors.Is(r.err, errNotAcquired):
		return nil, &exitError{exitNotAcquired, fmt.Errorf("%s %v; the command did not run", cl, r.err)}
	}
	return nil, &exitError{exitRunFailed, fmt.Errorf("acquire %s: %w; the command did not run", cl, r.err)}
}

// supervise waits for the command to end, passing signals on to it, and
// stops it if the hold is lost: SIGTERM to its process group, then
// SIGKILL after the grace period, whether the command itself has exited
// by then or not. What the command leaves running in its group when it
// exits gets the same. supervise returns once the group is gone, and
// releases the hold then, not before: the lock covers everything the
// command started.
func supervise(e *env, cl claim, h hold, ch *child, sigs <-chan os.Signal, f runFlags) error {
	var (
		lost    = h.done()
		exited  = ch.exited
		kill    *time.Timer // SIGKILL's, once SIGTERM is sent
		since   time.Time   // when the hold was found lost; zero while held
		stopped bool        // the group got SIGTERM
	)
	defer func() {
		if kill != nil {
			kill.Stop()
		}
	}()
	// stop sends the group SIGTERM, and SIGKILL -grace later.
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		if err := ch.signal(sigterm); err != nil {
			fmt.Fprintf(e.stderr, "dsync run: cannot send SIGTERM to the command: %v\n", err)
		}
		kill = time.NewTimer(f.grace)
	}
	var killC <-chan time.Time
	for {
		if kill != nil {
			killC = kill.C
		}
		select {
		case sig := <-sigs:
			if err := ch.signal(sig); err != nil {
				fmt.Fprintf(e.stderr, "dsync run: cannot pass %s on to the command: %v\n", signalName(sig), err)
			}
		case <-lost:
			lost, since = nil, time.Now()
			what := "the command"
			if exited == nil {
				what = "what the command left running in its process group"
			}
			fmt.Fprintf(e.stderr, "dsync run: lost %s (token %d) while %s ran: sending it SIGTERM, and SIGKILL %v later\n",
				cl, h.token(), what, f.grace)
			stop()
		case <-killC:
			kill, killC = nil, nil
			if ch.groupAlive() {
				fmt.Fprintf(e.stderr, "dsync run: the command's process group did not stop within %v of SIGTERM: sending SIGKILL\n", f.grace)
				if err := ch.signal(sigkill); err != nil {
					fmt.Fprintf(e.stderr, "dsync run: cannot send SIGKILL to the command: %v\n", err)
				}
			}
		case <-exited:
			exited = nil
			if ch.leftovers && !stopped {
				fmt.Fprintf(e.stderr, "dsync run: the command exited with status %d and left processes running in its process group: "+
					"sending them SIGTERM, and SIGKILL %v later; %s is released once they are gone\n", ch.status(), f.grace, cl)
				stop()
			}
		case <-ch.gone:
			if lost != nil {
				// Lost as the group ended? Then its last steps may have
				// overlapped the next holder's: say so.
				select {
				case <-lost:
					lost, since = nil, time.Now()
				default:
				}
			}
			if lost == nil {
				return &exitError{exitLost, fmt.Errorf("lost %s while the command ran; its process group was gone %v later, and the command's status was %d",
					cl, time.Since(since).Round(time.Millisecond), ch.status())}
			}
			releaseHold(e, cl, h, f.conn.timeout)
			if st := ch.status(); st != 0 {
				return &exitError{st, nil}
			}
			return nil
		}
	}
}

// releaseHold releases h, and says so if it cannot: the lock then stays
// held until its lease ends.
func releaseHold(e *env, cl claim, h hold, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := h.release(ctx); err != nil {
		fmt.Fprintf(e.stderr, "dsync run: release %s: %v (it is free again when its lease ends)\n", cl, err)
	}
}
