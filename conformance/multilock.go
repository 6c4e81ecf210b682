package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/multilock"
)

// multilockTests runs multilock.All over the exclusive kinds on the
// backend: the group behaves as one exclusive lock. RedLock needs
// independent servers, which a harness does not give; its tests start
// their own (package multilock). Only its releases run here, over members
// of different names on the one server, which they cannot tell apart from
// servers of their own.
func (s *suite) multilockRules() []rule {
	cases := []rule{
		{"MutualExclusion", "one holder of All at a time, over members given in different orders, across backends", true, s.testMultiMutualExclusion},
		{"PartialRelease", "a member held elsewhere blocks the group; the others are free right after the attempt", false, s.testMultiPartialRelease},
		{"MixedKinds", "a mutex, a fairlock and an rwlock's write side on separate backends work as one lock", false, s.testMultiMixedKinds},
		{"LostSignal", "a member's key deleted on the server closes the group's Done", false, s.testMultiLostSignal},
		{"BadInput", "no member, a nil or a repeated member is ErrInvalidMembers before any I/O", false, s.testMultiBadInput},
		{"GiveBackKeepsDeadline", "a failed LockContext returns half a second after its deadline at most, a member it gives back behind a partition included", false, s.testMultiGiveBackKeepsDeadline},
	}
	cases = append(cases, s.releaseRules("", groupReleases(false))...)
	return append(cases, s.releaseRules("RedLock", groupReleases(true))...)
}

// group returns All over the mutexes names[i] for i in order, under p.
func group(b backend.Backend, p string, names []string, order ...int) *multilock.Lock {
	var ms []dsync.Locker
	for _, i := range order {
		ms = append(ms, mutexKind.open(b, names[i], lockConfig{prefix: p}))
	}
	return multilock.All(ms...)
}

func (s *suite) testMultiMutualExclusion(t *testing.T, ctx context.Context) {
	const backends, perBackend, rounds = 4, 2, 40
	p := prefix()
	names := []string{"a", "b", "c"}
	orders := [][]int{{0, 1, 2}, {2, 1, 0}, {1, 2, 0}, {0, 2, 1}}
	var (
		shared int // read-modify-written without atomics: the group protects it
		inside atomic.Int32
		bad    atomic.Int32
	)
	var wg sync.WaitGroup
	errs := make(chan error, backends*perBackend)
	var b0 backend.Backend
	for i := range backends {
		b := s.newBackend(t)
		if i == 0 {
			b0 = b
		}
		l := group(b, p, names, orders[i%len(orders)]...)
		for j := range perBackend {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := range rounds {
					o := dsync.WithOwner(ctx)
					if (r+j)%2 == 1 {
						o = ctx // ownerless
					}
					if err := l.LockContext(o); err != nil {
						errs <- fmt.Errorf("lock: %w", err)
						return
					}
					if inside.Add(1) != 1 {
						bad.Add(1)
					}
					v := shared
					time.Sleep(50 * time.Microsecond)
					shared = v + 1
					inside.Add(-1)
					if err := l.UnlockContext(o); err != nil {
						errs <- fmt.Errorf("unlock: %w", err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if bad.Load() != 0 || shared != backends*perBackend*rounds {
		t.Fatalf("%d overlaps, counter %d, want 0 and %d", bad.Load(), shared, backends*perBackend*rounds)
	}
	for _, n := range names {
		assertNoKeys(t, ctx, b0, p, mutexKind.key(p, n), time.Hour+time.Minute)
	}
}

func (s *suite) testMultiPartialRelease(t *testing.T, ctx context.Context) {
	p := prefix()
	names := []string{"a", "b", "c"}
	b, ob := s.newBackend(t), s.newBackend(t)
	l := group(b, p, names, 0, 1, 2)
	other := mutexKind.open(ob, "b", lockConfig{prefix: p})
	oo := dsync.WithOwner(ctx)
	must(t, other.LockContext(oo), "lock b elsewhere")
	o := dsync.WithOwner(ctx)
	if ok, err := l.TryLockContext(o); ok || err != nil {
		t.Fatalf("TryLockContext with b held elsewhere = %v, %v; want false", ok, err)
	}
	free := func(when string) {
		for _, n := range []string{"a", "c"} {
			m := mutexKind.open(ob, n, lockConfig{prefix: p})
			if locked, err := m.IsLocked(ctx); err != nil || locked {
				t.Fatalf("%s: %s locked = %v, %v; want free", when, n, locked, err)
			}
		}
	}
	free("after the try")
	short, cancel := context.WithTimeout(o, 200*time.Millisecond)
	defer cancel()
	if err := l.LockContext(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LockContext with b held elsewhere = %v, want DeadlineExceeded", err)
	}
	free("after the failed lock")
	got := make(chan error, 1)
	go func() { got <- l.LockContext(o) }()
	must(t, other.UnlockContext(oo), "unlock b")
	must(t, within(t, s.bound(5*time.Second), got, "group lock after b's release"), "group lock")
	must(t, l.UnlockContext(o), "group unlock")
	for _, n := range names {
		assertNoKeys(t, ctx, b, p, mutexKind.key(p, n), time.Hour+time.Minute)
	}
}

func (s *suite) testMultiMixedKinds(t *testing.T, ctx context.Context) {
	p := prefix()
	kinds := []lockKind{mutexKind, fairlockKind, rwlockWriteKind}
	var ms, others []dsync.Locker
	for _, k := range kinds {
		ms = append(ms, k.open(s.newBackend(t), "mixed", lockConfig{prefix: p}))
		others = append(others, k.open(s.newBackend(t), "mixed", lockConfig{prefix: p}))
	}
	l := multilock.All(ms...)
	o := dsync.WithOwner(ctx)
	must(t, l.LockContext(o), "group lock")
	for i, m := range others {
		if ok, err := m.TryLockContext(dsync.WithOwner(ctx)); ok || err != nil {
			t.Fatalf("%s member: TryLockContext during the group's hold = %v, %v", kinds[i].kind, ok, err)
		}
	}
	toks, err := l.Tokens(o)
	must(t, err, "tokens")
	for i, tok := range toks {
		if tok <= 0 {
			t.Errorf("%s member: token %d, want > 0", kinds[i].kind, tok)
		}
	}
	must(t, l.UnlockContext(o), "group unlock")
	for i, m := range others {
		oo := dsync.WithOwner(ctx)
		if ok, err := m.TryLockContext(oo); !ok || err != nil {
			t.Fatalf("%s member: TryLockContext after the group's unlock = %v, %v", kinds[i].kind, ok, err)
		}
		must(t, m.UnlockContext(oo), "unlock")
	}
}

func (s *suite) testMultiLostSignal(t *testing.T, ctx context.Context) {
	const leaseD = time.Second
	p := prefix()
	b := s.newBackend(t)
	var ms []dsync.Locker
	for _, n := range []string{"a", "b"} {
		ms = append(ms, mutexKind.open(b, n, lockConfig{prefix: p, watchdog: leaseD}))
	}
	l := multilock.All(ms...)
	o := dsync.WithOwner(ctx)
	must(t, l.LockContext(o), "group lock")
	done := l.Done(o)
	_, err := b.Eval(ctx, delScript, []string{mutexKind.key(p, "b")})
	must(t, err, "DEL")
	within(t, s.bound(leaseD/3+500*time.Millisecond), done, "group's lost signal after DEL")
	if err := l.UnlockContext(o); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("unlock after loss: %v, want ErrNotHeld", err)
	}
	if locked, err := ms[0].(exclusiveLock).IsLocked(ctx); err != nil || locked {
		t.Errorf("member a locked = %v, %v after the lost group's unlock; want free", locked, err)
	}
}

func (s *suite) testMultiBadInput(t *testing.T, ctx context.Context) {
	b := s.newBackend(t)
	m := mutexKind.open(b, "bad", lockConfig{prefix: prefix()})
	o := dsync.WithOwner(ctx)
	for name, l := range map[string]*multilock.Lock{
		"none": multilock.All(), "nil": multilock.All(m, nil), "twice": multilock.All(m, m),
		"redlock none": multilock.RedLock(), "redlock twice": multilock.RedLock(m, m),
	} {
		if err := l.LockContext(o); !errors.Is(err, dsync.ErrInvalidMembers) {
			t.Errorf("%s: LockContext = %v, want ErrInvalidMembers", name, err)
		}
		if _, err := l.TryLockContext(o); !errors.Is(err, dsync.ErrInvalidMembers) {
			t.Errorf("%s: TryLockContext = %v, want ErrInvalidMembers", name, err)
		}
	}
}

// groupUnits is a multi-lock over mutexes: UnlockContext, which releases
// every member it holds.
type groupUnits struct {
	*multilock.Lock
	members []exclusiveLock
	quorum  int        // members a group hold needs
	take    *time.Time // when lock's last take began
}

// lock takes a group hold with every member. A RedLock may hold a
// majority only, when a member's attempt outlasts its timeout on a loaded
// machine; the cases count the calls and ends of every member's hold, so
// such a hold is given back and taken again, ten times at most. The
// cases that time a hold's lease count it from the last take (see
// takeBegan).
func (g groupUnits) lock(ctx context.Context) error {
	// The group may take members and give them back before it holds: a
	// RedLock round it lost, or a take of a majority only (below). Their
	// ends are reported before the release returns, while the rig knows
	// when this take began, and it does not count the ends of holds
	// taken since. Other ends come meanwhile too, and count: the same
	// owner's lock may learn first that a hold it released has ended.
	if began, _ := ctx.Value(muteKey{}).(*atomic.Int64); began != nil {
		began.Store(time.Now().UnixNano())
		defer began.Store(0)
	}
	for range 10 {
		*g.take = time.Now()
		if err := g.LockContext(ctx); err != nil || g.quorum == len(g.members) {
			return err
		}
		ns, err := g.counts(ctx)
		if err != nil || ns[0] == ns[len(ns)-g.quorum] {
			return err
		}
		if err := g.UnlockContext(ctx); err != nil {
			return err
		}
	}
	return errors.New("the RedLock took a majority of its members only, ten times")
}

func (g groupUnits) tryLock(ctx context.Context) (bool, error) { return g.TryLockContext(ctx) }
func (g groupUnits) takeBegan() time.Time                      { return *g.take }
func (g groupUnits) done(ctx context.Context) <-chan struct{}  { return g.Done(ctx) }
func (g groupUnits) unlock(ctx context.Context, n int) error   { one(n); return g.UnlockContext(ctx) }

// count returns the holds of ctx's owner on a quorum of members: a
// RedLock may hold a majority only.
func (g groupUnits) count(ctx context.Context) (int, error) {
	ns, err := g.counts(ctx)
	if err != nil {
		return 0, err
	}
	return ns[len(ns)-g.quorum], nil
}

// counts returns the holds of ctx's owner on each member, in increasing
// order.
func (g groupUnits) counts(ctx context.Context) ([]int, error) {
	ns := make([]int, len(g.members))
	for i, m := range g.members {
		n, err := m.HoldCount(ctx)
		if err != nil {
			return nil, err
		}
		ns[i] = n
	}
	slices.Sort(ns)
	return ns, nil
}

// groupReleases returns the release kind of All, or of RedLock, over
// three mutexes.
func groupReleases(redlock bool) releaseKind {
	open := func(b backend.Backend, name string, c lockConfig) releasable {
		g := groupUnits{quorum: 3, take: new(time.Time)}
		var ls []dsync.Locker
		for _, n := range []string{"a", "b", "c"} {
			m := mutexKind.open(b, name+"-"+n, c)
			g.members = append(g.members, m)
			ls = append(ls, m)
		}
		if redlock {
			g.quorum = 2
			g.Lock = multilock.NewRedLock(ls, multilock.WithLease(max(c.watchdog, c.fixed)))
		} else {
			g.Lock = multilock.All(ls...)
		}
		return g
	}
	call := "multilock All UnlockContext"
	if redlock {
		call = "multilock RedLock UnlockContext"
	}
	return releaseKind{call: call, holds: 3, spread: 1, open: open, rival: open}
}

func (s *suite) testMultiGiveBackKeepsDeadline(t *testing.T, ctx context.Context) {
	p := prefix()
	c := lockConfig{prefix: p} // the default lease: a release's own bound is seconds
	fb := newFaulty(s.newBackend(t))
	a := mutexKind.open(fb, "giveback-a", c)
	b := mutexKind.open(s.newBackend(t), "giveback-b", c)
	probe := mutexKind.open(s.newBackend(t), "giveback-a", c)
	rival := mutexKind.open(s.newBackend(t), "giveback-b", c)
	must(t, rival.LockContext(dsync.WithOwner(ctx)), "the rival's lock of the second member")
	// Once the group holds its first member, that member's backend is cut
	// off: the acquisition fails at its deadline, and gives the member
	// back through the partition.
	cut := make(chan struct{})
	go func() {
		defer close(cut)
		for end := time.Now().Add(s.bound(time.Second)); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			if locked, err := probe.IsLocked(ctx); err == nil && locked {
				fb.start(partition)
				return
			}
		}
	}()
	lctx, cancel := context.WithTimeout(ctx, releaseDeadline)
	defer cancel()
	m := meterStalls()
	start := time.Now()
	err := multilock.All(a, b).LockContext(lctx)
	over := time.Since(start) - releaseDeadline
	stalled := m.stop()
	<-cut
	fb.heal()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LockContext with a member held elsewhere: %v, want context.DeadlineExceeded", err)
	}
	if limit := 500*time.Millisecond + returnSlack + m.stalls(); over > limit {
		t.Errorf("LockContext returned %v after its deadline (stalled %v, %v in all); want at most 500ms", over, stalled, m.all)
	}
	t.Logf("LockContext returned %v after its deadline, giving a member back behind a partition", over.Round(time.Millisecond))
}
