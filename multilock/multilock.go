package multilock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsyncgo/dsync"
	ownerctx "github.com/dsyncgo/dsync/internal/owner"
	"github.com/dsyncgo/dsync/internal/wait"
)

// DefaultDriftFactor is RedLock's clock drift allowance, as a fraction of
// the lease, unless WithDriftFactor gives another.
const DefaultDriftFactor = 0.01

// DefaultLease is the lease RedLock counts validity against unless
// WithLease gives another: the members' default watchdog lease.
const DefaultLease = 30 * time.Second

// An Option configures a RedLock.
type Option func(*Lock)

// WithDriftFactor sets the clock drift RedLock allows for, as a fraction
// of the lease: the validity of an acquisition is the lease less the time
// it took less lease×f + 2ms. f must be in [0, 0.5); the default is 0.01.
func WithDriftFactor(f float64) Option {
	return func(l *Lock) {
		if f < 0 || f >= 0.5 || f != f {
			l.fail(fmt.Errorf("%w: drift factor %v (it must be in [0, 0.5))", dsync.ErrInvalidLease, f))
			return
		}
		l.drift = f
	}
}

// WithLease says what lease RedLock's members hold their locks with (their
// WithLease or WithWatchdog), against which the validity of an acquisition
// is counted. The default is 30s, the members' default. d must be at least
// 1ms.
func WithLease(d time.Duration) Option {
	return func(l *Lock) {
		if d < time.Millisecond {
			l.fail(fmt.Errorf("%w: %v (the minimum is 1ms)", dsync.ErrInvalidLease, d))
			return
		}
		l.lease = d
	}
}

// A Lock is a multi-lock: All or RedLock over its members. Its zero value
// is not usable; it is safe for concurrent use.
type Lock struct {
	members []dsync.Locker
	order   []int // member indices in canonical order
	quorum  int   // members a hold needs
	redlock bool
	// contended says a RedLock round of this lock last found a member
	// busy: an acquisition by an owner that holds none of the members
	// then queues for the first member before it tries the others (see
	// gateFirst).
	contended atomic.Bool
	drift     float64
	lease     time.Duration
	err       error

	mu    sync.Mutex
	holds map[string][]*hold // by owner, the newest last
	// anon are the owners of ownerless holds, oldest first: contexts
	// carrying nothing but the owner, kept to unlock with.
	anon []context.Context
}

var (
	_ dsync.Locker = (*Lock)(nil)
	_ sync.Locker  = (*Lock)(nil)
)

// All returns a lock that holds every one of locks, or none.
func All(locks ...dsync.Locker) *Lock {
	l := newLock(locks)
	l.quorum = len(locks)
	return l
}

// RedLock returns a lock that holds a majority (N/2+1) of locks, which
// must be on independent servers, with the default drift factor and lease.
func RedLock(locks ...dsync.Locker) *Lock { return NewRedLock(locks) }

// NewRedLock is RedLock with options.
func NewRedLock(locks []dsync.Locker, opts ...Option) *Lock {
	l := newLock(locks)
	l.redlock = true
	l.quorum = len(locks)/2 + 1
	for _, o := range opts {
		o(l)
	}
	return l
}

func newLock(locks []dsync.Locker) *Lock {
	l := &Lock{members: slices.Clone(locks), drift: DefaultDriftFactor, lease: DefaultLease, holds: map[string][]*hold{}}
	if len(locks) == 0 {
		l.fail(fmt.Errorf("%w: no locks", dsync.ErrInvalidMembers))
	}
	keys := make([]string, len(locks))
	for i, m := range locks {
		if m == nil || isNilPointer(m) {
			l.fail(fmt.Errorf("%w: lock %d is nil", dsync.ErrInvalidMembers, i))
			continue
		}
		for j := range i {
			if sameLock(locks[j], m) {
				l.fail(fmt.Errorf("%w: locks %d and %d are the same", dsync.ErrInvalidMembers, j, i))
			}
		}
		keys[i] = canonicalKey(m, i)
	}
	l.order = make([]int, len(locks))
	for i := range l.order {
		l.order[i] = i
	}
	slices.SortStableFunc(l.order, func(a, b int) int { return cmp.Compare(keys[a], keys[b]) })
	return l
}

func (l *Lock) fail(err error) {
	if l.err == nil {
		l.err = fmt.Errorf("multilock: %w", err)
	}
}

func isNilPointer(m dsync.Locker) bool {
	v := reflect.ValueOf(m)
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Chan, reflect.Func, reflect.Interface, reflect.Slice:
		return v.IsNil()
	}
	return false
}

func sameLock(a, b dsync.Locker) bool {
	if reflect.TypeOf(a) != reflect.TypeOf(b) || !reflect.TypeOf(a).Comparable() {
		return false
	}
	return a == b
}

// canonicalKey orders members the same way in every multi-lock and
// process: by type and name, for members that have a name.
func canonicalKey(m dsync.Locker, i int) string {
	if n, ok := m.(interface{ Name() string }); ok {
		return fmt.Sprintf("%T\x00%s", m, n.Name())
	}
	return fmt.Sprintf("%T\x00\xff%08d", m, i)
}

// hold is one acquisition of the group by an owner.
type hold struct {
	held []bool          // members acquired
	oc   context.Context // the owner's context, uncancelled
	done chan struct{}   // closed when the group is lost or unlocked
	stop chan struct{}   // ends the watcher
	gone chan struct{}   // closed when the watcher has ended
	once sync.Once       // closes done

	mu      sync.Mutex
	started bool     // the watcher runs (from the first Done)
	stopped bool     // the hold was released: no watcher may start
	lost    []string // the members the watcher saw lost, named
}

// startWatch starts h's watcher if it has not started: the first Done
// does, so that a group whose loss nobody asks about costs no goroutine.
func (l *Lock) startWatch(h *hold) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.started || h.stopped {
		return
	}
	h.started = true
	l.watch(h.oc, h)
}

func (h *hold) end() { h.once.Do(func() { close(h.done) }) }

// ownerCtx returns ctx if it carries an owner, or a copy with a fresh one.
func ownerCtx(ctx context.Context) (context.Context, bool) {
	if _, ok := dsync.OwnerFrom(ctx); ok {
		return ctx, false
	}
	return dsync.WithOwner(ctx), true
}

// LockContext acquires the group for ctx's owner (or a fresh ownerless
// hold), waiting while members are held by others, until ctx is done; see
// the package documentation. On failure nothing is left held and the
// error matches ctx.Err() or is a member's error.
func (l *Lock) LockContext(ctx context.Context) error {
	if l.err != nil {
		return l.err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("multilock: lock: %w", err)
	}
	oc, anon := ownerCtx(ctx)
	h, err := l.acquire(oc, true, anon)
	if err != nil {
		return fmt.Errorf("multilock: lock: %w", err)
	}
	l.keep(oc, anon, h)
	return nil
}

// TryLockContext makes one round of attempts on the members, in parallel,
// and reports whether the group is held now. It does not wait for a
// member held by another owner. When it fails, nothing is left held.
func (l *Lock) TryLockContext(ctx context.Context) (bool, error) {
	if l.err != nil {
		return false, l.err
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("multilock: trylock: %w", err)
	}
	oc, anon := ownerCtx(ctx)
	h, err := l.acquire(oc, false, anon)
	if err != nil {
		return false, fmt.Errorf("multilock: trylock: %w", err)
	}
	if h == nil {
		return false, nil
	}
	l.keep(oc, anon, h)
	return true, nil
}

// Lock acquires the group for a fresh ownerless hold, as sync.Mutex does,
// waiting however long it takes; it panics on an invalid lock or an error
// that cannot pass.
func (l *Lock) Lock() {
	if err := l.LockContext(context.Background()); err != nil {
		panic(err.Error())
	}
}

// Unlock releases the oldest ownerless hold of the group. It panics if
// there is none, as sync.Mutex does, and logs a member's failure to
// release.
func (l *Lock) Unlock() {
	err := l.UnlockContext(context.Background())
	if l.err != nil || errors.Is(err, errNoHold) {
		panic(fmt.Sprint("multilock: unlock of unlocked lock: ", err))
	}
	if err != nil {
		slog.Default().Warn("dsync: multilock unlock failed", "error", err)
	}
}

// errNoHold is wrapped, with dsync.ErrNotHeld, by an unlock that found no
// hold of the group.
var errNoHold = errors.New("the owner does not hold the group")

// UnlockContext releases one hold of the group by ctx's owner (or, with
// no owner in ctx, the oldest ownerless hold): every member it acquired,
// in parallel, with the member's UnlockContext on ctx (carrying the group
// hold's owner), as a direct unlock would. With dsync's locks as members,
// the release does not depend on ctx's cancellation, but the call returns
// by ctx's deadline plus 100ms (100ms after the call if ctx had ended
// already): a member whose outcome is not known by then reports an error
// matching ctx.Err(), and its release goes on in the background (see the
// package dsync documentation). It returns an error matching
// dsync.ErrNotHeld, without I/O, when the owner does not hold the group,
// and the members' errors joined (ErrNotHeld for a member that was lost)
// when a release failed or was not known to succeed in time: for All, any
// member's; for RedLock, only when fewer than a majority of the members
// were released (the others' leases run out by themselves).
func (l *Lock) UnlockContext(ctx context.Context) error {
	if l.err != nil {
		return l.err
	}
	oc, h := l.take(ctx)
	if h == nil {
		return fmt.Errorf("multilock: unlock: %w: %w", dsync.ErrNotHeld, errNoHold)
	}
	h.mu.Lock()
	h.stopped = true
	started := h.started
	h.mu.Unlock()
	close(h.stop)
	if started {
		<-h.gone
	}
	errs := l.releaseEach(ownedBy{ctx, oc}, h.held)
	h.end()
	released := 0
	for i, err := range errs {
		if h.held[i] && err == nil {
			released++
		}
	}
	if err := errors.Join(errs...); err != nil && (!l.redlock || released < l.quorum) {
		return fmt.Errorf("multilock: unlock: %w", err)
	}
	return nil
}

// Done returns a channel closed when the group hold that ctx refers to
// (ctx's owner's newest, or with no owner the newest ownerless one) is
// lost or unlocked; with no such hold it is already closed.
func (l *Lock) Done(ctx context.Context) <-chan struct{} {
	if h := l.current(ctx); h != nil {
		l.startWatch(h)
		return h.done
	}
	return closed
}

var closed = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Tokens returns the fencing tokens of the members the group hold that ctx
// refers to has acquired, by member, 0 for a member not held or without
// tokens. With no such hold the error matches dsync.ErrNotHeld.
func (l *Lock) Tokens(ctx context.Context) ([]int64, error) {
	if l.err != nil {
		return nil, l.err
	}
	oc, h := l.currentWithOwner(ctx)
	if h == nil {
		return nil, fmt.Errorf("multilock: tokens: %w", dsync.ErrNotHeld)
	}
	tokens := make([]int64, len(l.members))
	for i, m := range l.members {
		if t, ok := m.(interface {
			Token(context.Context) (int64, error)
		}); ok && h.held[i] {
			tokens[i], _ = t.Token(oc)
		}
	}
	return tokens, nil
}

// keep records a hold of the group by the owner of oc.
func (l *Lock) keep(oc context.Context, anon bool, h *hold) {
	owner, _ := dsync.OwnerFrom(oc)
	h.oc = ownerctx.Detach(oc)
	l.mu.Lock()
	l.holds[owner] = append(l.holds[owner], h)
	if anon {
		l.anon = append(l.anon, h.oc)
	}
	l.mu.Unlock()
}

// take removes and returns the hold an unlock with ctx releases, and the
// owner's context.
func (l *Lock) take(ctx context.Context) (context.Context, *hold) {
	l.mu.Lock()
	defer l.mu.Unlock()
	oc := ctx
	_, owned := dsync.OwnerFrom(ctx)
	if !owned {
		if len(l.anon) == 0 {
			return nil, nil
		}
		oc = l.anon[0] // detached by keep
		l.anon = l.anon[1:]
	}
	owner, _ := dsync.OwnerFrom(oc)
	hs := l.holds[owner]
	if len(hs) == 0 {
		return nil, nil
	}
	h := hs[len(hs)-1]
	if len(hs) == 1 {
		delete(l.holds, owner)
	} else {
		l.holds[owner] = hs[:len(hs)-1]
	}
	if owned {
		oc = ownerctx.Detach(oc)
	}
	return oc, h
}

func (l *Lock) current(ctx context.Context) *hold {
	_, h := l.currentWithOwner(ctx)
	return h
}

func (l *Lock) currentWithOwner(ctx context.Context) (context.Context, *hold) {
	l.mu.Lock()
	defer l.mu.Unlock()
	oc := ctx
	if _, ok := dsync.OwnerFrom(ctx); !ok {
		if len(l.anon) == 0 {
			return nil, nil
		}
		oc = l.anon[len(l.anon)-1]
	}
	owner, _ := dsync.OwnerFrom(oc)
	if hs := l.holds[owner]; len(hs) > 0 {
		return oc, hs[len(hs)-1]
	}
	return nil, nil
}

// watch closes h.done when the group loses too many members: any (All),
// or so many that no majority is left (RedLock).
func (l *Lock) watch(oc context.Context, h *hold) {
	cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(h.stop)}}
	var members []int // of cases[1:]
	held := 0
	for i, m := range l.members {
		if !h.held[i] {
			continue
		}
		held++
		if d, ok := m.(interface {
			Done(context.Context) <-chan struct{}
		}); ok {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(d.Done(oc))})
			members = append(members, i)
		}
	}
	spare := held - l.quorum // losses the group survives
	go func() {
		defer close(h.gone)
		for len(cases) > 1 {
			i, _, _ := reflect.Select(cases)
			if i == 0 {
				return
			}
			h.mu.Lock()
			h.lost = append(h.lost, l.memberName(members[i-1]))
			h.mu.Unlock()
			cases = slices.Delete(cases, i, i+1)
			members = slices.Delete(members, i-1, i)
			if spare--; spare < 0 {
				h.end()
				<-h.stop
				return
			}
		}
		<-h.stop
	}()
}

// result is the outcome of one attempt on a member.
type result struct {
	ok   bool
	busy bool // held by another owner
	down bool // err says the member could not be reached, for now
	err  error
}

// acquire runs rounds of attempts until the group is held, ctx is done,
// or (without block) one round failed. It returns nil and no error when a
// try found the group held by others. fresh says ctx's owner was made for
// this acquisition, and so holds nothing.
func (l *Lock) acquire(ctx context.Context, block, fresh bool) (*hold, error) {
	// A waiting RedLock queues: a round that finds a member busy does not
	// win with a majority of the others, but waits for that member, whose
	// waiters get it in turn. Otherwise a newcomer (the holder locking
	// again, say) takes the free majority from under a waiter that was
	// just handed the busy member, and waits grow without bound. A member
	// stuck held (its holder gone, its lease not yet run out) must not stop
	// a majority, though: after a wait for it times out, the next round may
	// win without it.
	//
	// A round that re-enters a majority the owner holds already takes it
	// from nobody, though: it wins without waiting for a busy member it
	// does not need.
	queue := block && l.redlock
	var known *result // the gate's, for the first round (see gateFirst)
	if queue && l.contended.Load() && (fresh || !slices.Contains(l.holding(ctx), true)) {
		h, timedOut, gate, err := l.gateFirst(ctx)
		if h != nil || err != nil {
			return h, err
		}
		if timedOut {
			queue = false // as after the gate's wait timed out
		}
		known = gate
	}
	for round := 0; ; round++ {
		var mine []bool
		if queue && !fresh {
			mine = l.holding(ctx)
		}
		start := time.Now()
		var skip []bool
		if known != nil {
			// The gate's attempt failed just before: a server that
			// stalls costs the acquisition one member timeout, not two.
			skip = make([]bool, len(l.members))
			skip[l.order[0]] = true
		}
		res := l.tryAll(ctx, skip)
		if known != nil {
			res[l.order[0]], known = *known, nil
		}
		if l.won(res, start) && (!queue || !anyBusy(res) || l.reentered(res, mine)) {
			return newHold(res), nil
		}
		l.release(ctx, heldOf(res))
		if l.redlock && anyBusy(res) {
			l.contended.Store(true)
		}
		down, err := l.failures(ctx, res)
		if err != nil {
			return nil, err
		}
		if !block {
			if len(down) > 0 && (!l.redlock || len(res)-len(down) < l.quorum) {
				return nil, errors.Join(down...) // no majority reachable
			}
			return nil, nil
		}
		if !l.redlock {
			return l.acquireOrdered(ctx)
		}
		gate := -1
		for _, i := range l.order {
			if res[i].busy {
				gate = i
				break
			}
		}
		if gate < 0 {
			// Nothing to wait for (members unreachable for now, or, for
			// RedLock, too slow for the validity): back off and try
			// again.
			if !wait.Sleep(ctx, backoff(round)) {
				return nil, errors.Join(append([]error{ctx.Err()}, down...)...)
			}
			continue
		}
		// Wait for the busy member holding nothing else, then try the
		// others while holding it. The wait is bounded: the member's
		// server may be the one that is gone, or its hold stuck.
		gctx, cancel := context.WithTimeout(ctx, gateWait)
		err = l.members[gate].LockContext(gctx)
		cancel()
		queue = err == nil
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			continue // the next round counts the member as it finds it
		}
		start = time.Now()
		res = l.tryOthers(ctx, gate)
		if l.won(res, start) {
			return newHold(res), nil
		}
		won, stuck := l.awaitMajority(ctx, gate, res, start, time.Since(start))
		if won {
			return newHold(res), nil
		}
		if stuck {
			queue = false // as after the gate's wait timed out
		}
		l.release(ctx, heldOf(res))
		if _, err := l.failures(ctx, res); err != nil {
			return nil, err
		}
		if !wait.Sleep(ctx, rand.N(time.Millisecond<<min(round, 4))) {
			return nil, ctx.Err()
		}
	}
}

// gateFirst is the first step of a RedLock acquisition by an owner that
// holds none of the members, once a round of this lock found a member
// busy: it queues for the first member in
// canonical order (the gate every contender queues for) before it tries
// the others. A round that tried all of them at once would take the free
// ones from under the waiter just handed the gate, which then waits for
// them (see awaitMajority), and give them back at once, since it found
// the gate busy: each hand-off would cost the waiter round trips more. It
// returns the hold if it won; otherwise nothing is held, and the caller
// goes on with its rounds, knowing whether the wait for the gate timed
// out (the gate may be stuck held), or, if the gate's attempt failed, its
// result, for the first round to count as it would its own.
func (l *Lock) gateFirst(ctx context.Context) (h *hold, timedOut bool, gate *result, err error) {
	g := l.order[0]
	start := time.Now()
	mctx, cancel := context.WithTimeout(ctx, l.memberTimeout())
	ok, err := l.members[g].TryLockContext(mctx)
	if err != nil {
		down := ctx.Err() == nil && (mctx.Err() != nil || wait.Transient(err))
		cancel()
		r := result{down: down, err: err}
		if ctx.Err() != nil {
			// No round after ctx's end (see below).
			_, err := l.failures(ctx, []result{r})
			return nil, false, nil, err
		}
		return nil, false, &r, nil
	}
	cancel()
	waited := !ok
	if waited {
		gctx, cancel := context.WithTimeout(ctx, gateWait)
		err = l.members[g].LockContext(gctx)
		timedOut = gctx.Err() != nil && ctx.Err() == nil
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, false, nil, err
			}
			return nil, timedOut, nil, nil
		}
		start = time.Now()
	}
	res := l.tryOthers(ctx, g)
	busy := anyBusy(res)
	won, stuck := l.won(res, start), false
	if !won {
		won, stuck = l.awaitMajority(ctx, g, res, start, time.Since(start))
	}
	if won {
		if !waited && !busy {
			l.contended.Store(false) // nothing was in the way
		}
		return newHold(res), false, nil, nil
	}
	l.release(ctx, heldOf(res))
	// Ended by ctx (or a member's error that cannot pass), it fails as a
	// round of acquire would: the caller's next round, after ctx's end,
	// could otherwise win with members that do not look at ctx, and
	// return a hold to a caller that gave up.
	if _, err := l.failures(ctx, res); err != nil {
		return nil, false, nil, err
	}
	return nil, stuck, nil, nil
}

// awaitMajority goes on from a round that holds the gate, the member it
// waited for, but not a majority: most often a newcomer (the last holder
// locking again) took some of the others in a round of its own, which it
// gives back at once since it found the gate busy (see acquire). Rather
// than let the gate go and try again later, while the newcomer queues for
// it, the round keeps the gate and waits for the first busy member that
// comes after the gate in canonical order, then tries the rest again,
// until it holds a majority within the validity. It waits for a member
// holding none that comes after it, as acquireOrdered does: it lets those
// go first (its tries take members in any order). Otherwise two rounds
// could each hold a member the other waits for, and both stall until a
// wait times out. Each wait is bounded by gateWait and by the validity
// left (a majority got past it cannot win, and the wait would only keep
// the members held from others), and it waits for each member at most
// once; one that times out (the member may be stuck held) goes on with
// the next. It reports whether the round won, and whether a wait timed
// out (stuck); res holds what it holds either way.
//
// What it waits for is most often a round that gives its members back as
// soon as its own tries reply, so each wait is bounded further by
// awaitRounds times the round trip of the tries that preceded it (rt),
// and no less than minAwait: a member stuck held then costs each waiter
// that holds the gate that short wait, not gateWait, which on a stuck
// member would queue every contender behind one another.
func (l *Lock) awaitMajority(ctx context.Context, gate int, res []result, start time.Time, rt time.Duration) (won, stuck bool) {
	bound := min(gateWait, max(minAwait, awaitRounds*rt))
	pos := make([]int, len(l.members)) // by member, its place in l.order
	for p, i := range l.order {
		pos[i] = p
	}
	for _, i := range l.order[pos[gate]+1:] {
		if !res[i].busy {
			continue
		}
		left := l.validity(start)
		if left <= 0 {
			return false, stuck // what it gets now cannot win
		}
		drop := make([]bool, len(l.members))
		for j, r := range res {
			if r.ok && pos[j] > pos[i] {
				drop[j], res[j] = true, result{}
			}
		}
		l.release(ctx, drop)
		wctx, cancel := context.WithTimeout(ctx, min(bound, left))
		err := l.members[i].LockContext(wctx)
		timedOut := wctx.Err() != nil && ctx.Err() == nil && left > bound
		cancel()
		switch {
		case err == nil:
			res[i] = result{ok: true}
			if l.won(res, start) {
				return true, stuck
			}
		case timedOut:
			// i may be stuck held (its holder gone, its lease not run
			// out): go on without it, as the next round would, rather
			// than give up the gate and wait for i again.
			stuck = true
		default:
			return false, stuck
		}
		skip := make([]bool, len(l.members))
		for j, r := range res {
			skip[j] = r.ok || r.err != nil // held, or failed (a busy member has no error)
		}
		for j, r := range l.tryAll(ctx, skip) {
			if !skip[j] {
				res[j] = r
			}
		}
		if l.won(res, start) {
			return true, stuck
		}
	}
	return false, stuck
}

// holding returns, by member, whether ctx's owner holds it now, or nil
// for a ctx without an owner. A member with a lost signal (a Done method,
// as dsync's locks have) says so itself, whichever handle or multi-lock
// the owner acquired it through; for another, the owner's newest hold of
// this group tells. It does no I/O.
func (l *Lock) holding(ctx context.Context) []bool {
	owner, ok := dsync.OwnerFrom(ctx)
	if !ok {
		return nil
	}
	var group []bool
	l.mu.Lock()
	if hs := l.holds[owner]; len(hs) > 0 {
		group = hs[len(hs)-1].held
	}
	l.mu.Unlock()
	mine := make([]bool, len(l.members))
	for i, m := range l.members {
		if d, ok := m.(interface {
			Done(context.Context) <-chan struct{}
		}); ok {
			select {
			case <-d.Done(ctx):
			default:
				mine[i] = true
			}
		} else {
			mine[i] = group != nil && group[i]
		}
	}
	return mine
}

// reentered reports whether a round re-entered a majority of members that
// were the owner's already (mine, see holding).
func (l *Lock) reentered(res []result, mine []bool) bool {
	n := 0
	for i, r := range res {
		if r.ok && mine != nil && mine[i] {
			n++
		}
	}
	return n >= l.quorum
}

// acquireOrdered acquires every member for All once a parallel round
// failed, as ordered locking does: it holds a prefix of the members in
// canonical order, waits (LockContext, woken by the member's pub/sub
// wake-ups) for the first member it lacks, then tries all the others in
// parallel, keeps the longest canonical prefix it now holds, releases
// the rest, and repeats. A group waits only for a member that comes after
// every member it holds, so groups that order their members alike cannot
// deadlock, and a member's waiters get it in turn, so none starves. A wait
// while holding members is bounded by holdWait: members that order alike
// but are not alike (same type and name on different backends, or
// members without a name) cost a group that wait, not a deadlock.
func (l *Lock) acquireOrdered(ctx context.Context) (*hold, error) {
	held := make([]bool, len(l.members))
	fail := func(err error) (*hold, error) {
		l.release(ctx, held)
		return nil, err
	}
	for round := 0; ; round++ {
		gate, holding := -1, false
		for _, i := range l.order {
			if held[i] {
				holding = true
			} else if gate < 0 {
				gate = i
			}
		}
		if gate < 0 {
			return &hold{held: held, done: make(chan struct{}), stop: make(chan struct{}), gone: make(chan struct{})}, nil
		}
		gctx, cancel := ctx, context.CancelFunc(func() {})
		if holding {
			gctx, cancel = context.WithTimeout(ctx, holdWait+rand.N(holdWait/2))
		}
		err := l.members[gate].LockContext(gctx)
		timedOut := gctx.Err() != nil
		cancel()
		if err != nil {
			if ctx.Err() != nil || !holding || !timedOut {
				return fail(err)
			}
			// Waited too long holding others: let them go, start over.
			l.release(ctx, held)
			clear(held)
			if !wait.Sleep(ctx, backoff(round)) {
				return nil, ctx.Err()
			}
			continue
		}
		held[gate] = true
		res := l.tryAll(ctx, held)
		for i, r := range res {
			if r.ok {
				held[i] = true
			}
		}
		if _, err := l.failures(ctx, res); err != nil {
			return fail(err)
		}
		// Keep the canonical prefix held; release what follows a gap.
		drop := make([]bool, len(held))
		gap := false
		for _, i := range l.order {
			switch {
			case !held[i]:
				gap = true
			case gap:
				drop[i], held[i] = true, false
			}
		}
		l.release(ctx, drop)
	}
}

// holdWait bounds All's wait for a member while it holds others.
const holdWait = 2 * time.Second

// gateWait bounds RedLock's wait for one busy member.
const gateWait = time.Second

// awaitRounds and minAwait bound a RedLock round's wait for a member
// while it holds its gate (see awaitMajority).
const (
	awaitRounds = 8
	minAwait    = 100 * time.Millisecond
)

// failures sorts out a failed round: it returns the errors of members that
// could not be reached (worth another round), or an error that ends the
// acquisition: ctx's end, or a member's error that cannot pass.
func (l *Lock) failures(ctx context.Context, res []result) (down []error, err error) {
	var fatal []error
	for _, r := range res {
		switch {
		case r.err == nil:
		case r.down:
			down = append(down, r.err)
		default:
			fatal = append(fatal, r.err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, errors.Join(append([]error{err}, append(fatal, down...)...)...)
	}
	if len(fatal) > 0 {
		return nil, errors.Join(fatal...)
	}
	return down, nil
}

// won reports whether a round that began at start holds the group: every
// member (All), or a majority with validity left (RedLock).
func (l *Lock) won(res []result, start time.Time) bool {
	n := 0
	for _, r := range res {
		if r.ok {
			n++
		}
	}
	if n < l.quorum {
		return false
	}
	return !l.redlock || l.validity(start) > 0
}

// validity returns what is left of the validity of a RedLock round that
// began at start: the lease less the time since less the drift allowance.
func (l *Lock) validity(start time.Time) time.Duration {
	drift := time.Duration(float64(l.lease)*l.drift) + 2*time.Millisecond
	return l.lease - time.Since(start) - drift
}

func newHold(res []result) *hold {
	return &hold{held: heldOf(res), done: make(chan struct{}), stop: make(chan struct{}), gone: make(chan struct{})}
}

func heldOf(res []result) []bool {
	held := make([]bool, len(res))
	for i, r := range res {
		held[i] = r.ok
	}
	return held
}

// tryAll makes one attempt on every member not in skip, in parallel (the
// last in the calling goroutine).
func (l *Lock) tryAll(ctx context.Context, skip []bool) []result {
	res := make([]result, len(l.members))
	mctx := ctx
	if l.redlock {
		// A server that stalls must not hold up the round: the others
		// are a majority without it. The members start together, so one
		// timer bounds each of them.
		var cancel context.CancelFunc
		mctx, cancel = context.WithTimeout(ctx, l.memberTimeout())
		defer cancel()
	}
	try := func(i int) {
		ok, err := l.members[i].TryLockContext(mctx)
		// A member's timeout, or an error that passes, is a member
		// down for now; ctx's end is not.
		down := err != nil && ctx.Err() == nil && (mctx.Err() != nil || wait.Transient(err))
		res[i] = result{ok: ok && err == nil, busy: !ok && err == nil, down: down, err: err}
	}
	each(len(l.members), func(i int) bool { return skip == nil || !skip[i] }, try)
	return res
}

// tryOthers tries every member but held, which the caller holds, in
// parallel, and returns the round's results with held's as acquired.
func (l *Lock) tryOthers(ctx context.Context, held int) []result {
	skip := make([]bool, len(l.members))
	skip[held] = true
	res := l.tryAll(ctx, skip)
	res[held] = result{ok: true}
	return res
}

// anyBusy reports whether a round found a member held by another owner.
func anyBusy(res []result) bool {
	return slices.ContainsFunc(res, func(r result) bool { return r.busy })
}

// each runs f for every i < n that pick accepts, in parallel, the last one
// in the calling goroutine, and returns when all have.
func each(n int, pick func(int) bool, f func(int)) {
	last := -1
	var wg sync.WaitGroup
	for i := range n {
		if !pick(i) {
			continue
		}
		if j := last; j >= 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				growStack()
				f(j)
			}()
		}
		last = i
	}
	if last >= 0 {
		f(last)
	}
	wg.Wait()
}

// growStack grows a member's goroutine's stack to 8 KiB at once, while
// the goroutine is shallow: a member's call reaches about that deep (a
// lock's core, the backend, the client's write path), and a goroutine
// starts with 2 KiB, so that growing on the way down would copy every
// frame twice. Measured on a RedLock of 5 (BenchmarkMultiLockRedLock,
// uncontended, redigo): stack copies fell from a tenth of the client's
// CPU to 2%, its CPU per lock+unlock by a tenth.
//
//go:noinline
func growStack() {
	var pad [6 << 10]byte
	keepFrame(pad[:])
}

// keepFrame keeps growStack's frame from being optimized away.
//
//go:noinline
func keepFrame([]byte) {}

// memberTimeout bounds one attempt on one RedLock member: a twentieth of
// the lease, between 50ms and 1s, so that a stalled server costs a round
// a small part of the validity.
func (l *Lock) memberTimeout() time.Duration {
	return min(max(l.lease/20, 50*time.Millisecond), time.Second)
}

// release unlocks the held members in parallel, with ctx, and returns
// their errors joined. A member's release does not depend on ctx's
// cancellation, but returns by its deadline (100ms after the call if ctx
// has ended), going on in the background: a failed acquisition that
// gives back what it took keeps ctx's deadline.
func (l *Lock) release(ctx context.Context, held []bool) error {
	return errors.Join(l.releaseEach(ctx, held)...)
}

// releaseEach unlocks the held members in parallel with ctx, and returns
// each member's error.
func (l *Lock) releaseEach(ctx context.Context, held []bool) []error {
	errs := make([]error, len(held))
	each(len(held), func(i int) bool { return held[i] }, func(i int) {
		errs[i] = l.members[i].UnlockContext(ctx)
	})
	return errs
}

// ownedBy is a context with the deadline and cancellation of the
// caller's, and the values of the owner's: an unlock keeps its caller's
// deadline and releases the members for the owner of the group hold,
// which an ownerless unlock's ctx does not carry.
type ownedBy struct {
	context.Context // the caller's
	owner           context.Context
}

func (c ownedBy) Value(key any) any {
	if v := c.owner.Value(key); v != nil {
		return v
	}
	return c.Context.Value(key)
}

// backoff returns the pause after the n-th round with nothing to wait for:
// exponential from 10ms, capped at 500ms, with jitter.
func backoff(n int) time.Duration {
	d := min(10*time.Millisecond<<min(n, 6), 500*time.Millisecond)
	return d/2 + rand.N(d/2+1)
}
