package multilock

import (
	"context"
	"errors"
	"fmt"
	"reflect"
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
// Members report their losses on channels, so a scope keeps one goroutine
// while it is on, which ends when the group is lost or unlock is called.
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
		go l.watchScope(oc, h, cancel, stop, gone)
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

// watchScope cancels a scope's context when its group hold h is lost,
// naming the members lost, or returns when stop is closed; it closes gone
// when it returns.
func (l *Lock) watchScope(oc context.Context, h *hold, cancel context.CancelCauseFunc, stop, gone chan struct{}) {
	defer close(gone)
	cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(stop)}}
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
	var lost []string
	for len(cases) > 1 {
		i, _, _ := reflect.Select(cases)
		if i == 0 {
			return
		}
		lost = append(lost, l.memberName(members[i-1]))
		cases = append(cases[:i], cases[i+1:]...)
		members = append(members[:i-1], members[i:]...)
		if spare--; spare < 0 {
			cancel(fmt.Errorf("multilock: %w (lost: %s): %w", errGroupLost, strings.Join(lost, "; "), dsync.ErrNotHeld))
			return
		}
	}
	<-stop
}

// memberName names member i in a message: its position, type and name.
func (l *Lock) memberName(i int) string {
	m := l.members[i]
	if n, ok := m.(interface{ Name() string }); ok {
		return fmt.Sprintf("member %d, %T %q", i, m, n.Name())
	}
	return fmt.Sprintf("member %d, %T", i, m)
}
