package multilock

import (
	"context"
	"fmt"

	"github.com/dsyncgo/dsync"
)

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
