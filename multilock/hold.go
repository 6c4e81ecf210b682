package multilock

import (
	"context"
	"reflect"
	"slices"
	"sync"

	"github.com/dsyncgo/dsync"
	ownerctx "github.com/dsyncgo/dsync/internal/owner"
)

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
