// Command dsync demonstrates, inspects and measures dsync's locks.
//
// Usage:
//
//	dsync <command> [flags] [arguments]
//
// The commands are:
//
//	demo          workers contend on a mutex; report what happened
//	run           run a command while holding a lock or leading; stop it if that ends
//	inspect       show the state of one lock: mutex, fairlock, rwlock, semaphore, election
//	list          list the held locks of one kind on a server
//	force-unlock  free a lock, whoever holds it
//	doctor        check a server's settings that break locks
//	bench         measure dsync against redsync and bsm/redislock
//
// Run "dsync <command> -h" for a command's flags. Flags may come before or
// after a command's arguments: "dsync inspect orders:42 -redis host:6379".
// See "Connecting" below for the server a command talks to.
//
// # demo
//
//	dsync demo [-redis URL] [-workers n] [-rounds n] [-hold d]
//
// Workers, each with a connection pool of its own as separate processes
// would have, take turns on a mutex with a random name; the demo reports
// the waits, that no two held it at once and that the fencing tokens
// increased, then shows re-entry and a fixed lease running out. It runs on
// an embedded miniredis unless -redis (-cluster, -sentinel) names a real
// server. On a real server it deletes the keys it created when it ends
// (the freed lock keys and fence keys would otherwise stay for an hour,
// the fencing token's lifetime), and says so.
//
// # run
//
//	dsync run [-redis URL] [-lease d] [-wait d] [-grace d] [-elect [-value v]] name -- command [args...]
//
// run takes the mutex called name, runs the command while it holds it and
// releases it when the command ends, as consul lock and etcdctl lock do: a
// cron job that runs on one machine of many at a time. The command finds
// DSYNC_NAME and DSYNC_TOKEN (the hold's fencing token) in its
// environment, and runs in a process group of its own, to which run passes
// on SIGINT, SIGTERM and SIGHUP. If the lock is lost while the command
// runs, the group gets SIGTERM, then SIGKILL -grace (10s) later, whether
// the command itself has exited by then or not, and run exits with status
// 123 once the group is gone. Otherwise, when the command exits, what it
// left running in its group gets SIGTERM, then SIGKILL -grace later, and
// run releases the lock once the group is gone and exits with the
// command's status. It waits for the lock for as long as it takes, or
// -wait, after which it exits with status 124 without running the command.
// Without a flag that names the server, it is the environment's, else
// localhost:6379 (see Connecting). "dsync run -h" lists every exit status.
//
// With -elect, run campaigns in the election called name instead, with
// -value (host:pid by default) as the leader's value, runs the command
// while it leads, and resigns when the command ends, handing leadership
// to the next candidate at once; DSYNC_TOKEN is the term's fencing token.
//
// # inspect
//
//	dsync inspect [-redis URL] [-kind k] [-prefix p] [-json] name
//
// inspect prints the state of the lock of kind k (mutex, fairlock, rwlock,
// semaphore or election; mutex by default) called name. For a mutex or a fair lock:
// the holder's owner id, its hold count, its fencing token (the last one
// if the lock is free), the remaining lease, and the waiters (for a mutex,
// how many and the owner ids of the first few in the order a release picks
// them; for a fair lock, the length of its queue). For a read-write lock:
// the same of the write hold, the readers, and the writers and readers
// waiting. For a semaphore: its capacity, the permits held and available,
// the owners holding them and the waiters queued. For an election: the
// leader's value, the owner id of its campaign, its token, when its term
// began, the remaining lease and the candidates queued, with the values of
// the first few. With -json it prints one JSON object with the fields
//
//	kind             "mutex", "fairlock", "rwlock", "semaphore" or "election"
//	name             the lock's name
//	key              its main key on the server, e.g. "dsync:mutex:{orders:42}"
//	locked           whether anything is held: a hold, a read hold, a permit, a term
//	waiters          mutex: waiters registered on the server; fairlock, semaphore:
//	                 live waiters queued; rwlock: writers and readers waiting;
//	                 election: live candidates queued
//
// and, for a mutex, a fair lock, the write side of a read-write lock and an
// election (whose holder is the leader's campaign),
//
//	holder           the holder's owner id; "" if none
//	hold_count       the holder's hold count; 0 if none
//	token            the holder's fencing token, or the last one; 0 if none known
//	lease_ms         remaining lease in milliseconds; 0 if no hold, -1 if the
//	                 key has no expiry
//	next_waiters     mutex only: owner ids of the first few waiters, next first
//
// for a read-write lock,
//
//	mode             "free", "read" or "write"
//	readers          owners holding read holds
//	waiting_writers  live writers queued
//	waiting_readers  live readers waiting
//
// and for a semaphore, whose state has no holder ids or tokens,
//
//	capacity         the capacity in force; 0 if none is recorded (a free
//	                 semaphore, none set at runtime)
//	capacity_set     whether it was set at runtime (SetCapacity)
//	held             permits held
//	available        permits free
//	holders          owners holding permits
//
// and for an election,
//
//	value            the leader's value; "" if none
//	began_ms         when the term began, in Unix ms by the server's clock;
//	                 0 if none or unknown
//	candidates       values of the first candidates queued, next first
//
// for example
//
//	{"kind": "mutex", "name": "orders:42", "key": "dsync:mutex:{orders:42}",
//	 "locked": true, "holder": "5f0c9e…", "hold_count": 2, "token": 17,
//	 "lease_ms": 29513, "waiters": 1, "next_waiters": ["9a41d2…"]}
//
// # list
//
//	dsync list [-redis URL] [-kind k] [-prefix p] [-json]
//
// list finds the locks of one kind under the prefix with SCAN (it does not
// block the server) and prints those that are held, by name, with what
// inspect shows of each. Keys of free locks (a freed lock key keeps only
// the last fencing token) and companion keys are skipped; a read-write
// lock held by readers only is found by its :readers key. With -json it
// prints a JSON array of objects like inspect's, sorted by name.
//
// # force-unlock
//
//	dsync force-unlock [-redis URL] [-kind k] [-prefix p] [-yes] name
//
// force-unlock takes the lock from whoever holds it and passes it on, as a
// release would; the holders learn of the loss at their next renewal. For
// a mutex, a fair lock or an election it takes the hold (the term) it
// read, by its fencing token, and leaves alone one taken since; for a read-write lock every hold,
// write and read; for a semaphore every permit (package semaphore has no
// force release: its holders' leases are deleted, or a lone holder's
// state, which ends their permits as when all its holders die, and its
// queued waiters take the permits at their next attempt). Unless -yes
// is given it first asks, on standard error,
//
//	force-unlock mutex "NAME" held by OWNER? [y/N]
//
// and reads the answer from standard input; anything but y or yes leaves
// the lock alone and exits with status 1. It refuses if the holders
// changed while it asked. A lock that is not held is reported and left
// alone, with status 0.
//
// # doctor
//
//	dsync doctor [-redis URL] [-prefix p] [-json]
//
// doctor checks the server settings that break locks without an error and
// says what to change: a maxmemory-policy that can evict lock keys (any
// but noeviction: dsync's keys carry TTLs, so volatile-* policies evict
// them too), persistence off or RDB only (a restart forgets holds), a
// replica, or replicas without min-replicas-to-write (a failover can give
// a lock to two processes), cluster mode and its hash slots, Lua scripts
// and pub/sub refused (ACL, rename-command, a full server, a slot not
// served), a server older than Redis 6.0, and the round-trip time. Each
// check is ok, a warning or a failure; failures are listed first, each
// with its fix. With -cluster it checks every primary of the cluster. With
// -json it prints one JSON object (server, failures, warnings, and checks:
// name, node with -cluster, status, detail, fix). It exits with status 1
// if a check failed. Without a flag that names the server, it is the
// environment's, else localhost:6379.
//
// # bench
//
//	dsync bench [-redis host:port] [flags]
//
// bench runs dsync and its peers side by side on one server, by default a
// private redis-server started from PATH; see "dsync bench -h" and
// bench/README.md. Its -redis takes host:port (or redis://host:port) of a
// server without a password or TLS: its peers connect so. Progress is
// shown on standard error when it is a terminal.
//
// # Connecting
//
// Every command that talks to a server takes one of
//
//	-redis host:port, or a URL redis://[user:password@]host:port[/db]
//	       (rediss:// for TLS; :password@ for the default user)
//	-cluster [redis[s]://[user:password@]]host:port,...
//	       seed nodes of a Redis Cluster
//	-sentinel [redis[s]://[user:password@]]name@host:port,...[/db]
//	       the primary called name, found through these Sentinels (the
//	       credentials are the primary's: the Sentinels are asked without
//	       any, over TLS too with rediss://)
//
// with TLS verified against the system's CAs, or those of -tls-ca file;
// -tls-insecure skips the verification, with a warning on standard error.
// Without such a flag, run, doctor, inspect, list and force-unlock take
// the server from the environment: $DSYNC_REDIS (else $REDIS_URL),
// $DSYNC_CLUSTER or $DSYNC_SENTINEL, in the forms of -redis, -cluster and
// -sentinel, so that a password stays off the command line (ps shows
// argv to every user; dsync never passes the password to a process it
// starts in its arguments). run and doctor then default to localhost:6379.
// demo and bench use a server of their own unless given one by flag: they
// never pick up the environment's, where the production locks are.
//
// A server that is not there, a user or password it refuses, and TLS that
// fails are three errors, each saying what to check; none shows the
// password.
//
// # Timeouts, interrupts and exit status
//
// Every connection is dialed, read and written under a timeout (-timeout,
// 3s by default), and every call to the server is bounded by it, so a
// server that does not answer is an error within seconds, never a hang.
// (The library rides out an unreachable server for as long as a lock
// acquisition may wait; demo stops at the library's first warning
// instead.) An interrupt (Ctrl-C) stops demo and bench: demo
// prints what it measured so far and cleans up, bench what it completed.
//
// dsync exits with status 0 on success and after -h, 2 on a usage error
// (unknown command, bad flag, missing or extra arguments), 130 when
// interrupted, and 1 on any other failure.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// Exit statuses.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitInterrupted = 130 // 128 + SIGINT, as shells report it
)

// env is what a command reads and writes.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// A command is one of dsync's subcommands.
type command struct {
	name    string
	summary string
	hidden  bool
	run     func(ctx context.Context, e *env, args []string) error
}

// synopses are the commands' arguments, as usage shows them.
var synopses = map[string]string{
	"run":          "[-redis URL] [-lease d] [-wait d] [-grace d] [-elect [-value v]] name -- command [args...]",
	"doctor":       "[-redis URL] [-prefix p] [-json]",
	"demo":         "[-redis URL] [-workers n] [-rounds n] [-hold d]",
	"inspect":      "[-redis URL] [-kind k] [-prefix p] [-json] name",
	"list":         "[-redis URL] [-kind k] [-prefix p] [-json]",
	"force-unlock": "[-redis URL] [-kind k] [-prefix p] [-yes] name",
	"bench":        "[-redis host:port] [flags]",
}

// commands lists the subcommands in the order usage shows them.
var commands = []command{
	{name: "demo", summary: "workers contend on a mutex; report what happened", run: demo},
	{name: "run", summary: "run a command while holding a lock; stop it if the lock is lost", run: runLocked},
	{name: "inspect", summary: "show the state of one lock", run: inspect},
	{name: "list", summary: "list the held locks on a server", run: list},
	{name: "force-unlock", summary: "free a lock, whoever holds it", run: forceUnlock},
	{name: "doctor", summary: "check a server's settings that break locks", run: doctor},
	{name: "bench", summary: "measure dsync against redsync and bsm/redislock", run: runBench},
	{name: benchWorker, hidden: true, run: func(ctx context.Context, e *env, _ []string) error {
		return workerMain(ctx, e)
	}},
}

// run runs dsync with the arguments after the program name and returns
// its exit status. An interrupt (SIGINT) cancels the command's context.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return runContext(ctx, args, stdin, stdout, stderr)
}

// runContext is run with the interrupt as ctx's cancellation: the command
// counts as interrupted if ctx ends before it returns.
func runContext(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		topUsage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		if len(args) > 1 && args[0] == "help" {
			if c := lookup(args[1]); c != nil {
				return runCommand(ctx, e, c, []string{"-h"})
			}
			fmt.Fprintf(stderr, "dsync help: unknown command %q\n", args[1])
			topUsage(stderr)
			return exitUsage
		}
		topUsage(stdout)
		return exitOK
	}
	c := lookup(args[0])
	if c == nil {
		fmt.Fprintf(stderr, "dsync: unknown command %q\n", args[0])
		topUsage(stderr)
		return exitUsage
	}
	return runCommand(ctx, e, c, args[1:])
}

func runCommand(ctx context.Context, e *env, c *command, args []string) int {
	err := c.run(ctx, e, args)
	var (
		ue usageError
		xe *exitError
	)
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &xe):
		if xe.err != nil {
			fmt.Fprintf(e.stderr, "dsync %s: %v\n", c.name, xe.err)
		}
		return xe.code
	case errors.As(err, &ue):
		fmt.Fprintf(e.stderr, "dsync %s: %s\n", c.name, ue.msg)
		fmt.Fprintf(e.stderr, "usage: dsync %s %s\nRun 'dsync %s -h' for details.\n", c.name, synopses[c.name], c.name)
		return exitUsage
	case ctx.Err() != nil:
		fmt.Fprintf(e.stderr, "dsync %s: interrupted\n", c.name)
		return exitInterrupted
	}
	fmt.Fprintf(e.stderr, "dsync %s: %v\n", c.name, err)
	return exitFailure
}

func lookup(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

func topUsage(w io.Writer) {
	fmt.Fprint(w, "dsync demonstrates, inspects and measures dsync's distributed locks.\n\nusage:\n\n")
	for _, c := range commands {
		if !c.hidden {
			fmt.Fprintf(w, "  dsync %-12s %s\n", c.name, synopses[c.name])
		}
	}
	fmt.Fprint(w, "\ncommands:\n\n")
	for _, c := range commands {
		if !c.hidden {
			fmt.Fprintf(w, "  %-12s  %s\n", c.name, c.summary)
		}
	}
	fmt.Fprint(w, "\nThe server: -redis host:port or redis://[user:password@]host:port[/db]\n"+
		"(rediss:// for TLS), -cluster host:port,... or -sentinel name@host:port,...;\n"+
		"without them, run, doctor, inspect, list and force-unlock read $DSYNC_REDIS\n"+
		"(or $REDIS_URL), $DSYNC_CLUSTER or $DSYNC_SENTINEL.\n"+
		"\nRun 'dsync <command> -h' for a command's flags.\n"+
		"Exit status: 0 success, 1 failure, 2 usage error, 130 interrupted;\n"+
		"run exits with the command's status or one of its own (see 'dsync run -h').\n")
}

// usageError is a command line that a command cannot run: it exits with
// status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return usageError{fmt.Sprintf(format, args...)}
}

// exitError ends a command with a status of its own, such as run's
// statuses, after printing err on stderr unless it is nil.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// flagSet is a command's flags and how it prints its usage.
type flagSet struct {
	*flag.FlagSet
	e    *env
	desc string
}

// newFlagSet returns the flags of command name, whose usage shows the
// synopsis from synopses and desc.
func newFlagSet(e *env, name, desc string) *flagSet {
	fs := &flagSet{FlagSet: flag.NewFlagSet("dsync "+name, flag.ContinueOnError), e: e, desc: desc}
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: dsync %s %s\n\n%s\n\nflags:\n", name, synopses[name], strings.TrimSpace(desc))
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args, flags and positional arguments in any order: flags
// are parsed, then, if arguments remain, the first is taken as a
// positional one and the rest parsed again. "--" ends the flags. It
// returns the positional arguments, flag.ErrHelp after -h (the full usage
// printed on stdout), or a usageError saying what flag complained of.
func (fs *flagSet) parse(args []string) ([]string, error) {
	var pos []string
	for {
		rest, err := fs.parseFlags(args)
		if err != nil {
			return nil, err
		}
		if len(rest) == 0 {
			return pos, nil
		}
		if fs.endedByDashes(args[:len(args)-len(rest)]) {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// parseFlags parses the flags at the start of args and returns the
// arguments after them: after the first one that is not a flag, or after
// "--". It returns flag.ErrHelp after -h (the full usage printed on
// stdout), or a usageError saying what flag complained of.
func (fs *flagSet) parseFlags(args []string) ([]string, error) {
	var buf bytes.Buffer
	usage := fs.Usage
	fs.Usage = func() {} // flag calls it on -h and on errors alike
	fs.SetOutput(&buf)
	defer func() {
		fs.Usage = usage
		fs.SetOutput(fs.e.stderr)
	}()
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(fs.e.stdout)
		usage()
		return nil, flag.ErrHelp
	}
	if err != nil {
		return nil, usageError{strings.TrimSpace(buf.String())}
	}
	return fs.Args(), nil
}

// endedByDashes reports whether the parsed arguments ended with "--" as
// the terminator rather than as the value of a flag.
func (fs *flagSet) endedByDashes(parsed []string) bool {
	n := len(parsed)
	if n == 0 || parsed[n-1] != "--" {
		return false
	}
	if n == 1 {
		return true
	}
	prev := parsed[n-2]
	if !strings.HasPrefix(prev, "-") || strings.Contains(prev, "=") {
		return true
	}
	f := fs.Lookup(strings.TrimLeft(prev, "-"))
	if f == nil {
		return true
	}
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return true
	}
	return false // "--" was the value of prev
}

// stderrIsTerminal reports whether w is a terminal: progress is shown only
// there.
func stderrIsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// defaultTimeout bounds dialing a server and each read and write on a
// connection, unless -timeout says otherwise.
const defaultTimeout = 3 * time.Second
