package multilock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/dsyncgo/dsync"
)

// errGroupLost is wrapped, with dsync.ErrNotHeld, in the cause of a
// scope's context whose group was lost.
var errGroupLost = errors.New("the group was lost")

// LockScope locks the group as LockContext does and returns the hold as
// a context, cancelled when the group is lost or unlocked, and unlock,
// which unlocks it, as mutex.Mutex.LockScope does for one lock. The group
// is lost as Done says: when a member it holds is lost (All), or so many
// that no majority is left (RedLock); context.Cause of the context then
// matches dsync.ErrNotHeld and names the members lost. The context
// carries the hold's owner (ctx's, or a fresh one), so that acquisitions
// with it re-enter, Tokens with it finds the hold, and unlock releases
// this hold from any goroutine. unlock cancels the context, then unlocks
// as UnlockContext does, detached from any ctx (each member bounds its own
// release), once; later calls return the first's result.
//
// Members report their losses on channels, so a scope keeps two goroutines
// while it is on (the group's watcher, as Done starts it, and its own),
// which end when the group is lost or unlock is called.
// On failure LockScope returns LockContext's error and a nil context and
// function.
func (l *Lock) LockScope(ctx context.Context) (context.Context, func() error, error) {
	if l.err != nil {
		return nil, nil, l.err
	}
	oc, _ := ownerCtx(ctx)
	if err := l.LockContext(oc); err != nil {
		return nil, nil, err
	}
	sctx, cancel := context.WithCancelCause(oc)
	stop, gone := make(chan struct{}), make(chan struct{})
	if h := l.current(oc); h == nil {
		cancel(fmt.Errorf("multilock: %w: %w", errGroupLost, dsync.ErrNotHeld))
		close(gone)
	} else {
		go l.watchScope(h, cancel, stop, gone)
	}
	var once sync.Once
	var err error
	return sctx, func() error {
		once.Do(func() {
			close(stop)
			<-gone
			cancel(nil)
			err = l.UnlockContext(context.WithoutCancel(oc))
		})
		return err
	}, nil
}

// watchScope cancels a scope's context when its group hold h ends (see
// watch), naming the members lost if it was lost, or returns when stop is
// closed; it closes gone when it returns.
func (l *Lock) watchScope(h *hold, cancel context.CancelCauseFunc, stop, gone chan struct{}) {
	defer close(gone)
	l.startWatch(h)
	select {
	case <-h.done:
		h.mu.Lock()
		lost := h.lost
		h.mu.Unlock()
		if len(lost) == 0 {
			cancel(nil) // unlocked, not through the scope
			return
		}
		cancel(fmt.Errorf("multilock: %w (lost: %s): %w", errGroupLost, strings.Join(lost, "; "), dsync.ErrNotHeld))
	case <-stop:
	}
}

// memberName names member i in a message: its position, type and name.
func (l *Lock) memberName(i int) string {
	m := l.members[i]
	if n, ok := m.(interface{ Name() string }); ok {
		return fmt.Sprintf("member %d, %T %q", i, m, n.Name())
	}
	return fmt.Sprintf("member %d, %T", i, m)
}
