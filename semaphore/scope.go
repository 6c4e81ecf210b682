package semaphore

import (
	"context"
)

// AcquireScope acquires n permits as Acquire does and returns them as a
// context, cancelled when they end, and release, which gives the n
// permits back, as mutex.Mutex.LockScope does for a hold: when the
// permits are lost (their lease ran out, or the state was deleted),
// context.Cause of the context matches dsync.ErrNotHeld and says how. The
// context carries the permits' owner (ctx's, or a fresh one): an owner
// that acquires more with it adds to the same permits, whose loss ends
// every scope of the owner, and release gives back this scope's n only.
// release cancels the context, then releases as Release does, once. On
// failure it returns Acquire's error and a nil context and function.
func (s *Semaphore) AcquireScope(ctx context.Context, n int64) (context.Context, func() error, error) {
	if err := s.check("acquire", n); err != nil {
		return nil, nil, err
	}
	return s.h.Scope(ctx, role,
		func(ctx context.Context) error { return s.Acquire(ctx, n) },
		func(ctx context.Context) error { return s.Release(ctx, n) })
}
