package mutex_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/hub"
)

// Backends that fail on purpose (a lost reply, a cut link, a late wake-up,
// a key that vanishes) and the other helpers the package's tests share.

// elsewhere makes a backend act as if in a process of its own (as
// conformance's elsewhere does): scripts that hand the mutex to a waiter
// are told the caller is another process, so they wake the waiter through
// pub/sub, and the caller does not see whom they woke: the reply is cut
// before the waiter's address ("<process>.<n>/<waiter id>", see hub).
type elsewhere struct{ backend.Backend }

func (e elsewhere) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	args = slices.Clone(args)
	for i, a := range args {
		if id, ok := a.(string); ok && hub.IsID(id) {
			args[i] = "elsewhere"
		}
	}
	reply, err := e.Backend.Eval(ctx, s, keys, args...)
	if a, ok := reply.([]any); ok {
		for i, v := range a {
			if v, ok := v.(string); ok && i > 0 && hub.IsID(strings.SplitN(v, "/", 2)[0]) && strings.Contains(v, "/") {
				reply = a[:i]
				break
			}
		}
	}
	return reply, err
}

// slowWake is a backend whose subscriptions deliver every message delay
// late, as a congested pub/sub path would. Closing stop ends the delays,
// so that no goroutine is left asleep in a synctest bubble.
type slowWake struct {
	backend.Backend
	delay time.Duration
	stop  chan struct{}
}

func (s *slowWake) Subscribe(ctx context.Context, channel string) (backend.Subscription, error) {
	sub, err := s.Backend.Subscribe(ctx, channel)
	if err != nil {
		return nil, err
	}
	return &slowSub{Subscription: sub, delay: s.delay, stop: s.stop}, nil
}

type slowSub struct {
	backend.Subscription
	delay time.Duration
	stop  chan struct{}
}

func (s *slowSub) Receive(ctx context.Context) (backend.Message, error) {
	m, err := s.Subscription.Receive(ctx)
	if err != nil {
		return m, err
	}
	t := time.NewTimer(s.delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.stop:
	}
	return m, nil
}

// logRecords collects what a logger built by logger() handles.
type logRecords struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logRecords) logger() *slog.Logger { return slog.New(captureHandler{r: l}) }

// count returns how many records at level or above mention s (in the
// message or an attribute's value); s == "" matches every record.
func (l *logRecords) count(level slog.Level, s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.recs {
		if r.Level >= level && strings.Contains(recordText(r), s) {
			n++
		}
	}
	return n
}

func (l *logRecords) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, r := range l.recs {
		fmt.Fprintf(&b, "\n\t%v %s", r.Level, recordText(r))
	}
	return b.String()
}

func recordText(r slog.Record) string {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	return b.String()
}

type captureHandler struct {
	r     *logRecords
	attrs []slog.Attr
}

func (h captureHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h captureHandler) Handle(_ context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(h.attrs...)
	h.r.mu.Lock()
	h.r.recs = append(h.r.recs, r)
	h.r.mu.Unlock()
	return nil
}

func (h captureHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return captureHandler{r: h.r, attrs: append(slices.Clone(h.attrs), as...)}
}

func (h captureHandler) WithGroup(string) slog.Handler { return h }

// catchPanic runs f and returns what it panicked with, if anything.
func catchPanic(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}

func uniqueName(prefix string) string { return prefix + "-" + dsync.NewID()[:12] }

// vanishOnRelease runs the first 4-key script called after armed is set
// (the release), then deletes the lock key, as ForceUnlock or a flush
// would, and holds the reply for pause.
type vanishOnRelease struct {
	backend.Backend
	srv   *miniredis.Miniredis
	key   string
	pause time.Duration
	armed atomic.Bool
	fired atomic.Bool
}

func (v *vanishOnRelease) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	if len(keys) == 4 && v.armed.CompareAndSwap(true, false) {
		reply, err := v.Backend.Eval(ctx, s, keys, args...)
		v.srv.Del(v.key)
		v.fired.Store(true)
		time.Sleep(v.pause)
		return reply, err
	}
	return v.Backend.Eval(ctx, s, keys, args...)
}

// boomFirst is a backend whose first subscription fails, Receive
// returning an error that is not a close, once boom is closed. Closing
// stop ends it as a close would, so that no goroutine is left blocked in
// a synctest bubble.
type boomFirst struct {
	backend.Backend
	boom, stop chan struct{}
	subs       atomic.Int32
}

func (b *boomFirst) Subscribe(ctx context.Context, channel string) (backend.Subscription, error) {
	s, err := b.Backend.Subscribe(ctx, channel)
	if err != nil || b.subs.Add(1) != 1 {
		return s, err
	}
	return &boomSub{Subscription: s, boom: b.boom, stop: b.stop, closed: make(chan struct{})}, nil
}

type boomSub struct {
	backend.Subscription
	boom, stop chan struct{}
	closed     chan struct{}
	once       sync.Once
}

func (s *boomSub) Receive(ctx context.Context) (backend.Message, error) {
	select {
	case <-s.boom:
		return backend.Message{}, errors.New("boom")
	case <-s.closed:
		return backend.Message{}, dsync.ErrClosed
	case <-s.stop:
		return backend.Message{}, dsync.ErrClosed
	case <-ctx.Done():
		return backend.Message{}, ctx.Err()
	}
}

func (s *boomSub) Close() error {
	s.once.Do(func() { close(s.closed) })
	return s.Subscription.Close()
}

// flaky fails every script call with a connection error (transient)
// while fail is set, without reaching the server, as a cut network would.
// failNext fails only the next call.
type flaky struct {
	backend.Backend
	fail     atomic.Bool
	failNext atomic.Bool
}

var errNet = errors.New("read tcp 127.0.0.1:1->127.0.0.1:2: connection reset by peer")

func (f *flaky) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	if f.fail.Load() || f.failNext.CompareAndSwap(true, false) {
		return nil, errNet
	}
	return f.Backend.Eval(ctx, s, keys, args...)
}

// loseReply runs the next script call once armed, then runs during
// before returning a connection error instead of its reply: the call
// applied, the caller does not know, and others ran meanwhile.
type loseReply struct {
	backend.Backend
	armed  atomic.Bool
	during func()
}

func (l *loseReply) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	if l.armed.CompareAndSwap(true, false) {
		if _, err := l.Backend.Eval(ctx, s, keys, args...); err != nil {
			return nil, err
		}
		l.during()
		return nil, errNet
	}
	return l.Backend.Eval(ctx, s, keys, args...)
}

// countCalls counts the script calls made through it.
type countCalls struct {
	backend.Backend
	n atomic.Int64
}

func (c *countCalls) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	c.n.Add(1)
	return c.Backend.Eval(ctx, s, keys, args...)
}

// partitionAfter fails every script call with a connection error while
// cut is set; once armed, the next call runs and then the cut starts
// (the reply is lost with the link). Calls carrying the operation id of
// that call wait on hold after the cut heals until held is closed, as a
// retry sleeping out its backoff would.
type partitionAfter struct {
	backend.Backend
	armed atomic.Bool
	cut   atomic.Bool
	op    atomic.Value // string
	held  chan struct{}
}

func (p *partitionAfter) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	if p.armed.CompareAndSwap(true, false) {
		p.op.Store(args[1])
		if _, err := p.Backend.Eval(ctx, s, keys, args...); err != nil {
			return nil, err
		}
		p.cut.Store(true)
		return nil, errNet
	}
	if p.cut.Load() {
		return nil, errNet
	}
	if op, _ := p.op.Load().(string); op != "" && len(args) > 1 && args[1] == op {
		<-p.held
	}
	return p.Backend.Eval(ctx, s, keys, args...)
}
