package waitgroup

import (
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/codec"
	"github.com/dsyncgo/dsync/internal/core"
	"github.com/dsyncgo/dsync/internal/lease"
	"github.com/dsyncgo/dsync/internal/options"
	"github.com/dsyncgo/dsync/internal/script"
	"github.com/dsyncgo/dsync/observe"
)

// DefaultWaiterTimeout is how long a waiter's registration outlives its
// last heartbeat unless WithWaiterTimeout says otherwise.
const DefaultWaiterTimeout = 5 * time.Second

// ErrVanished reports a Wait whose group's state vanished from the server
// (deleted, or evicted under maxmemory) while it had units pending: the
// count did not reach 0, and is unknown.
var ErrVanished = errors.New("dsync/waitgroup: the group's state vanished with units pending")

// AbandonedError reports units that their owner abandoned: its lease ran
// out before it counted them down, because its process died or could not
// reach the server for a lease. It matches dsync.ErrAbandoned.
type AbandonedError struct {
	Owner string // the owner id of the handle that added them (see WaitGroup.Owner)
	Units int64  // its units pending when its lease ran out
}

func (e *AbandonedError) Error() string {
	return fmt.Sprintf("%v: %d units of owner %s", dsync.ErrAbandoned, e.Units, e.Owner)
}

// Unwrap returns dsync.ErrAbandoned.
func (e *AbandonedError) Unwrap() error { return dsync.ErrAbandoned }

type settings struct {
	options.Common
	keep bool
}

// An Option configures a WaitGroup.
type Option struct{ apply func(*settings) }

// WithWatchdog sets the lease that the watchdog renews while units added
// through the handle are pending, every d/3. The default is 30s, so the
// units of a process that crashes are abandoned within 30s. d must be at
// least 1ms.
func WithWatchdog(d time.Duration) Option { return Option{func(s *settings) { s.SetWatchdog(d) }} }

// WithLease makes the units added through the handle abandoned d after the
// handle's last Add unless counted down by then, with no renewal. d must
// be at least 1ms.
func WithLease(d time.Duration) Option { return Option{func(s *settings) { s.SetLease(d) }} }

// WithWaiterTimeout sets how long a waiter's registration outlives its
// last heartbeat; waiters beat every third of it. A Wait stopped (SIGSTOP,
// a debugger) or cut off from the server for longer than that may report
// ErrVanished for a group that emptied meanwhile; so may one cut off while
// more than 64 later phases with waiters ended (a group remembers the ends
// of its last 64 such phases). The default is DefaultWaiterTimeout, 5s. d must
// be at least 10ms.
func WithWaiterTimeout(d time.Duration) Option {
	return Option{func(s *settings) { s.SetWaiterTimeout(d) }}
}

// WithKeepAbandoned keeps Redisson's semantics: units whose owner's lease
// ran out stay pending, Wait keeps waiting for them, and the group's keys
// do not expire until its count is 0. It takes effect when an Add through
// the handle finds the group empty, for every handle until the count is 0
// again: handles on one group should agree.
func WithKeepAbandoned() Option { return Option{func(s *settings) { s.keep = true }} }

// WithObserver sets the observer of this handle's holds of units (see
// package observe), instead of its backend's. The default is the
// backend's observer, if observe.Set gave it one.
func WithObserver(o *observe.Observer) Option { return Option{func(s *settings) { s.Observer = o }} }

// WithPrefix sets the first part of every key and channel name; the
// default is "dsync". It must not be empty or contain braces.
func WithPrefix(p string) Option { return Option{func(s *settings) { s.Prefix = p }} }

// WithLogger sets where background events are logged: units lost (Warn),
// a server that cannot be reached while waiting (Warn), lease renewals
// retried (Debug). The default is slog.Default(); nil discards them.
func WithLogger(l *slog.Logger) Option { return Option{func(s *settings) { s.SetLogger(l) }} }

// A WaitGroup is a handle on a wait group shared through a Redis-compatible
// server. Create one with New; the zero value is not usable. A WaitGroup is
// safe for concurrent use, and any number of WaitGroup values, in any
// number of processes, may refer to the same name.
type WaitGroup struct {
	h              core.Handle
	owner, channel string
	keys           []string
	keep           bool
	hold           core.HoldSpec
	done           core.ReleaseSpec

	mu      sync.Mutex
	l       *lease.Lease // of the units added through the handle
	pending int64        // those units
}

// New returns a handle on the wait group called name on b. Its units
// belong to an owner of its own, a fresh id (see Owner). It does no I/O.
// Bad arguments (a nil backend, an empty name or one over 1 KiB, a lease
// under 1ms, a bad prefix) are reported, matching dsync.ErrInvalidBackend,
// ErrInvalidName or ErrInvalidLease, by every call on the handle.
func New(b backend.Backend, name string, opts ...Option) *WaitGroup {
	s := settings{Common: options.Defaults()}
	s.WaiterTimeout = DefaultWaiterTimeout
	for _, o := range opts {
		o.apply(&s)
	}
	g := &WaitGroup{owner: dsync.NewID(), keep: s.keep}
	g.h.Init(b, "waitgroup", name, s.Common)
	g.keys = []string{g.h.Key, g.h.Companion("holders"), g.h.Companion("waiters"), g.h.Companion("done")}
	g.channel = g.h.Companion("wake")
	g.hold = core.HoldSpec{Role: "u", Channel: g.channel, Renew: renewScript, Keys: g.keys[:2], Extra: []any{core.Ms(s.WaiterTimeout)}}
	g.done = core.ReleaseSpec{Script: doneScript, Keys: g.keys, Channel: g.channel, EntryTTL: s.WaiterTimeout, Units: true, Args: []any{""}}
	return g
}

// Name returns the name the wait group was created with.
func (g *WaitGroup) Name() string { return g.h.Name }

// Owner returns the owner id of the units added through g, as an
// AbandonedError and State name it.
func (g *WaitGroup) Owner() string { return g.owner }

// header returns the argument header (see package codec) of a script g
// runs itself, for the operation op and the waiter entry.
func (g *WaitGroup) header(op any, entry string) []any {
	hd := g.h.Header(g.channel)
	hd.Owner, hd.Op, hd.Lease, hd.Entry = g.owner, op, core.Ms(g.h.Cfg.Lease), entry
	return hd.Append(make([]any, 0, codec.HeaderLen+3))
}

// MaxUnits is the most units a group counts: the greatest integer that
// the server's Lua counts exactly (2^53 - 1).
const MaxUnits = script.MaxExact

// scriptError makes the wait script's error replies an *AbandonedError or
// ErrVanished.
func scriptError(err error) error {
	var se *backend.ServerError
	switch {
	case !errors.As(err, &se):
	case strings.HasPrefix(se.Message, "DSYNC too many units"):
		return fmt.Errorf("%w: the count would pass %d", dsync.ErrInvalidPermits, int64(MaxUnits))
	case strings.HasPrefix(se.Message, "DSYNC vanished"):
		return ErrVanished
	case strings.HasPrefix(se.Message, "DSYNC abandoned "):
		a := &AbandonedError{}
		fmt.Sscan(strings.TrimPrefix(se.Message, "DSYNC abandoned "), &a.Owner, &a.Units)
		return a
	}
	return err
}

//go:embed lua/*.lua
var lua embed.FS

var (
	addScript     = newScript("add")
	doneScript    = newScript("done")
	waitScript    = newScript("wait")
	inspectScript = newScript("inspect")
	renewScript   = newScript("renew")
)

// newScript builds a wait group script on its state (lua/state.lua).
func newScript(name string) *backend.Script { return script.New(source("state"), source(name)) }

func source(name string) string {
	b, _ := lua.ReadFile("lua/" + name + ".lua")
	return string(b)
}
