package multilock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/multilock"
	"github.com/dsyncgo/dsync/mutex"
)

// members are the mutexes a..(a+n) of one RedLock test, on a real
// redis-server, each handle on a backend of its own (waiters queue on
// the server, not behind a hold of their session, see mutex) and with
// strict hand-off, so that each release serves the member's waiters in
// turn rather than let a newcomer in.
type members struct {
	t    *testing.T
	ctx  context.Context
	addr string
	base string
	opts []mutex.Option
}

func newMembers(t *testing.T, ctx context.Context, name string, opts ...mutex.Option) *members {
	return &members{t: t, ctx: ctx, addr: testserver.Real(t).Addr(), base: name + "-" + dsync.NewID()[:8],
		opts: append([]mutex.Option{mutex.WithHandoffAfter(0)}, opts...)}
}

// handle returns a new handle on member i.
func (m *members) handle(i int) *mutex.Mutex {
	return mutex.New(tcpBackend(m.t, m.addr), m.base+string(rune('a'+i)), m.opts...)
}

// handles returns new handles on the first n members, in order.
func (m *members) handles(n int) []dsync.Locker {
	var ms []dsync.Locker
	for i := range n {
		ms = append(ms, m.handle(i))
	}
	return ms
}

// redlock returns a RedLock over new handles on the first n members.
func (m *members) redlock(n int) *multilock.Lock { return multilock.RedLock(m.handles(n)...) }

// hold locks member i for an owner of its own and returns its release.
func (m *members) hold(i int) (release func()) {
	m.t.Helper()
	h, o := m.handle(i), dsync.WithOwner(m.ctx)
	if err := h.LockContext(o); err != nil {
		m.t.Fatal(err)
	}
	return func() {
		if err := h.UnlockContext(o); err != nil {
			m.t.Error(err)
		}
	}
}

// awaitWaiters waits until member i has n waiters registered.
func (m *members) awaitWaiters(i, n int) {
	m.t.Helper()
	probe := m.handle(i)
	deadline := time.Now().Add(5 * time.Second)
	for k := 0; ; k++ {
		st, err := probe.State(m.ctx)
		if err != nil {
			m.t.Fatal(err)
		}
		if st.Waiters >= n {
			return
		}
		if time.Now().After(deadline) || k > 5000 {
			m.t.Fatalf("member %c has %d waiters after 5s, want %d", 'a'+i, st.Waiters, n)
		}
		time.Sleep(time.Millisecond)
	}
}
