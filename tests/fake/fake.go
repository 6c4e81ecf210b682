// Package fake provides the embedded servers of dsync's tests: miniredis
// on loopback, and miniredis inside a testing/synctest bubble, whose TTLs
// follow the bubble's fake clock. It lives in a module of its own so that
// the library's module does not require miniredis.
package fake

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
	"github.com/gomodule/redigo/redis"
	"go.uber.org/goleak"

	"github.com/dsyncgo/dsync/backend"
	bredigo "github.com/dsyncgo/dsync/backend/redigo"
)

// Fake starts an in-process miniredis for a testing/synctest bubble:
// connections are in-memory pipes (Dial), and TTLs follow the bubble's
// fake clock, so a 30s lease passes in no real time. Call it inside the
// bubble; it is closed when t ends.
func Fake(t testing.TB) *miniredis.Miniredis {
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true)
	t.Cleanup(m.Close)
	return m
}

// FakeBackend returns a redigo backend on m with a pool of its own, both
// closed when t ends. It does not pipeline (redigo.WithPipelining(false)):
// in fake time an in-process server that compiles every script runs a
// batch while no fake clock moves, and the tests here are of the locks'
// logic, which a pipelined round trip does not change; the conformance
// suite covers pipelining on miniredis in real time.
func FakeBackend(t testing.TB, m *miniredis.Miniredis, opts ...bredigo.Option) backend.Backend {
	pool := &redis.Pool{
		// Bounded, so that the in-process server's goroutines (two per
		// connection) do not vary with how many calls overlap.
		MaxIdle:   4,
		MaxActive: 4,
		Wait:      true,
		Dial: func() (redis.Conn, error) {
			c, err := m.Dial()
			if err != nil {
				return nil, err
			}
			return redis.NewConn(c, 0, 0), nil
		},
	}
	b := bredigo.New(pool, append([]bredigo.Option{bredigo.WithPipelining(false)}, opts...)...)
	t.Cleanup(func() {
		b.Close()
		pool.Close()
	})
	return b
}

// Server is an embedded miniredis on loopback whose TTLs follow the wall
// clock.
type Server struct {
	mu   sync.Mutex
	mini *miniredis.Miniredis
	stop chan struct{} // ends the clock (see tick)
	done chan struct{}

	clock sync.Mutex   // held by an advance
	last  atomic.Int64 // the TTLs follow the clock up to it, in Unix ns
}

var (
	shared   *Server
	sharedMu sync.Mutex
)

// Mini returns the package's shared embedded miniredis, starting it on
// first use. StopShared stops it.
func Mini(t testing.TB) *Server {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil {
		m := miniredis.NewMiniRedis()
		if err := m.Start(); err != nil {
			t.Fatal(err)
		}
		shared = newServer(m)
		go shared.tick()
	}
	return shared
}

// newServer returns m as a Server whose TTLs follow the clock from now on,
// once its clock ticks (see tick).
func newServer(m *miniredis.Miniredis) *Server {
	s := &Server{mini: m, stop: make(chan struct{}), done: make(chan struct{})}
	s.last.Store(time.Now().UnixNano())
	m.Server().SetPreHook(s.beforeCommand)
	return s
}

// clockStep is how often the shared server's TTLs advance with the clock.
const clockStep = time.Millisecond

// tick advances the server's TTLs with the clock every clockStep, as a real
// server expires keys, until stop closes. miniredis's ClockTTL does the
// same on every command instead, sorting every key each time: on a server
// shared by a whole suite, that alone made each script call cost
// milliseconds under -race.
func (s *Server) tick() {
	defer close(s.done)
	t := time.NewTicker(clockStep)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.advance(0)
		}
	}
}

// beforeCommand advances the TTLs before a command when the ticks are late
// (a loaded machine): otherwise the next tick would charge a key the command
// sets with the whole gap, and expire it early. A miniredis pre-hook.
//
// It never waits. The commands a script makes come through the hook while
// the script holds the server's lock, which FastForward takes, and a hook
// that waited for an advance under a burst of scripts made every command
// wait in line: it advances only when no advance is under way and the
// server's lock is free, and otherwise leaves the command to the next tick.
func (s *Server) beforeCommand(*server.Peer, string, ...string) bool {
	if !s.late() || !s.clock.TryLock() {
		return false
	}
	defer s.clock.Unlock()
	if s.mini.TryLock() {
		s.mini.Unlock()
		s.advanceLocked(clockStep)
	}
	return false
}

// late reports whether the TTLs are more than a clockStep behind. It takes
// no lock: a script's command, which holds the server's, calls it.
func (s *Server) late() bool {
	return time.Now().UnixNano()-s.last.Load() > int64(clockStep)
}

// advance charges the TTLs with the time since the last advance, if more
// than over.
func (s *Server) advance(over time.Duration) {
	s.clock.Lock()
	defer s.clock.Unlock() // under clock: two advances charge their shares in turn
	s.advanceLocked(over)
}

// advanceLocked is advance, with s.clock held.
func (s *Server) advanceLocked(over time.Duration) {
	now := time.Now().UnixNano()
	d := time.Duration(now - s.last.Load())
	if d <= over {
		return
	}
	s.last.Store(now)
	s.mini.FastForward(d)
}

// StopShared stops the shared server; call it from TestMain after m.Run.
func StopShared() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		close(shared.stop)
		<-shared.done
		shared.mini.Close()
		shared = nil
	}
}

// Addr returns host:port.
func (s *Server) Addr() string { return s.mini.Addr() }

// NewBackend returns a redigo backend with a pool of its own, closed when t
// ends, as a separate process would have.
func (s *Server) NewBackend(t testing.TB, opts ...bredigo.Option) backend.Backend {
	addr := s.Addr()
	pool := &redis.Pool{
		MaxIdle: 64,
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			return redis.DialContext(ctx, "tcp", addr)
		},
	}
	b := bredigo.New(pool, opts...)
	t.Cleanup(func() {
		b.Close()
		pool.Close()
	})
	return b
}

// NewBackendPair returns two redigo backends over one pool, closed when t
// ends: the pool after both backends.
func (s *Server) NewBackendPair(t testing.TB) (backend.Backend, backend.Backend) {
	addr := s.Addr()
	pool := &redis.Pool{
		MaxIdle: 64,
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			return redis.DialContext(ctx, "tcp", addr)
		},
	}
	a, b := bredigo.New(pool), bredigo.New(pool)
	t.Cleanup(func() {
		a.Close()
		b.Close()
		pool.Close()
	})
	return a, b
}

// FlushScripts empties the server's script cache.
func (s *Server) FlushScripts(ctx context.Context) error {
	c, err := redis.DialContext(ctx, "tcp", s.Addr())
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = redis.DoContext(c, ctx, "SCRIPT", "FLUSH")
	return err
}

// Restart stops the server and starts it again on the same address. It
// keeps its data; every client connection is dropped.
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mini.Close()
	if err := s.mini.Restart(); err != nil {
		return err
	}
	s.mini.Server().SetPreHook(s.beforeCommand) // Restart drops it
	return nil
}

// LeakOptions ignores the goroutines of an embedded server that a test
// restarted.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/alicebob/miniredis/v2/server.(*Server).serve"),
		goleak.IgnoreAnyFunction("github.com/alicebob/miniredis/v2/server.(*Server).servePeer"),
		// A connection's reader, alive while a pool keeps the connection.
		goleak.IgnoreAnyFunction("github.com/alicebob/miniredis/v2/server.(*Server).servePeer.func2"),
	}
}

// Gated wraps a backend whose script calls and pub/sub deliveries can be
// held back, each on a gate of its own, as a paused server or a congested
// path holds them: a script call made while its gate is shut waits, before
// it is sent, until the gate opens or its context ends; a message that
// arrives while the delivery gate is shut is handed on when it opens.
// Both gates start open. Gated hides the optional interfaces of the
// backend it wraps (a batch is a script call it would not hold).
type Gated struct {
	backend.Backend

	mu           sync.Mutex
	evals, wakes chan struct{} // nil while open
}

// NewGated returns b gated, with both gates opened when t ends, so that
// nothing is left waiting behind them in a testing/synctest bubble.
func NewGated(t testing.TB, b backend.Backend) *Gated {
	g := &Gated{Backend: b}
	t.Cleanup(func() {
		g.OpenEvals()
		g.OpenDeliveries()
	})
	return g
}

// HoldEvals shuts the gate of script calls.
func (g *Gated) HoldEvals() { g.shut(&g.evals) }

// OpenEvals opens the gate of script calls, letting the held ones go.
func (g *Gated) OpenEvals() { g.open(&g.evals) }

// HoldDeliveries shuts the gate of pub/sub deliveries.
func (g *Gated) HoldDeliveries() { g.shut(&g.wakes) }

// OpenDeliveries opens the gate of pub/sub deliveries, handing on the
// held messages.
func (g *Gated) OpenDeliveries() { g.open(&g.wakes) }

func (g *Gated) shut(gate *chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if *gate == nil {
		*gate = make(chan struct{})
	}
}

func (g *Gated) open(gate *chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if *gate != nil {
		close(*gate)
		*gate = nil
	}
}

// pass waits for gate to be open, or for ctx to end: at its deadline
// too when it can never be done (Done returns nil), as dsync's releases
// and renewals pass (rule 7 of package backend).
func (g *Gated) pass(ctx context.Context, gate *chan struct{}) error {
	g.mu.Lock()
	c := *gate
	g.mu.Unlock()
	if c == nil {
		return nil
	}
	var expiry <-chan time.Time
	if d, ok := ctx.Deadline(); ok && ctx.Done() == nil {
		t := time.NewTimer(time.Until(d))
		defer t.Stop()
		expiry = t.C
	}
	select {
	case <-c:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-expiry:
		return context.DeadlineExceeded
	}
}

// Eval runs the script once the gate of script calls is open.
func (g *Gated) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	if err := g.pass(ctx, &g.evals); err != nil {
		return nil, err
	}
	return g.Backend.Eval(ctx, s, keys, args...)
}

// Subscribe returns a subscription whose messages pass the delivery gate.
func (g *Gated) Subscribe(ctx context.Context, channel string) (backend.Subscription, error) {
	sub, err := g.Backend.Subscribe(ctx, channel)
	if err != nil {
		return nil, err
	}
	return gatedSub{Subscription: sub, g: g}, nil
}

type gatedSub struct {
	backend.Subscription
	g *Gated
}

func (s gatedSub) Receive(ctx context.Context) (backend.Message, error) {
	m, err := s.Subscription.Receive(ctx)
	if err != nil {
		return m, err
	}
	if err := s.g.pass(ctx, &s.g.wakes); err != nil {
		return backend.Message{}, err
	}
	return m, nil
}
