package mutex_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/mutex"
)

// refuser answers the next call of the release script with a server
// error reply, without sending it, as a server that refused the script
// before it ran (OOM, BUSY, LOADING) answers.
type refuser struct {
	backend.Backend
	refuse atomic.Pointer[string]
}

func (r *refuser) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	if strings.HasPrefix(s.Source(), "-- release:") {
		if msg := r.refuse.Swap(nil); msg != nil {
			return nil, &backend.ServerError{Message: *msg}
		}
	}
	return r.Backend.Eval(ctx, s, keys, args...)
}

// A release refused by the server applied nothing: if its retry then
// finds the hold gone, the hold was lost before the release, and Unlock
// says so (ErrNotHeld), as it does when its first attempt finds it gone.
// Only an attempt that may have run (its reply lost, its connection
// broken) makes a hold found gone count as released.
func TestRefusedReleaseThenHoldGoneIsLost(t *testing.T) {
	srv := testserver.Real(t)
	for _, msg := range []string{
		"OOM command not allowed when used memory > 'maxmemory'.",
		"BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
		"LOADING Redis is loading the dataset in memory",
	} {
		t.Run(strings.Fields(msg)[0], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			name := "refused-" + dsync.NewID()[:8]
			r := &refuser{Backend: srv.NewBackend(t)}
			m := mutex.New(r, name, mutex.WithLogger(nil))
			o := dsync.WithOwner(ctx)
			if err := m.LockContext(o); err != nil {
				t.Fatal(err)
			}
			// Drawn, so that the release is the script's.
			if _, err := m.Token(o); err != nil {
				t.Fatal(err)
			}
			if n, err := redis.Int(srv.Do(ctx, "DEL", "dsync:mutex:{"+name+"}")); err != nil || n != 1 {
				t.Fatalf("DEL = %d, %v", n, err)
			}
			r.refuse.Store(&msg)
			if err := m.UnlockContext(o); !errors.Is(err, dsync.ErrNotHeld) {
				t.Errorf("Unlock of a hold deleted before it, its first attempt refused with %q: %v; want ErrNotHeld", strings.Fields(msg)[0], err)
			}
			if r.refuse.Load() != nil {
				t.Error("the release script was never called")
			}
		})
	}
}
