package goredis_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend/goredis"
	"github.com/dsyncgo/dsync/conformance/harness"
	"github.com/dsyncgo/dsync/mutex"
)

// busyReply is an error reply as go-redis gives it (a redis.Error).
type busyReply string

func (e busyReply) Error() string { return string(e) }
func (busyReply) RedisError()     {}

// waitHook stands in for the replicas of WithReplicaAck: it answers every
// WAIT with one acknowledgement, except that, once armed, it makes the
// WAIT that follows a script which ran reply with BUSY, as the server
// does to a WAIT it reads while another client's script runs past
// busy-reply-threshold (the pipeline's WAIT in a later read than its
// EVALSHA).
type waitHook struct{ armed atomic.Bool }

func (h *waitHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *waitHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return next
}

func (h *waitHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		ran := len(cmds) > 0 && (cmds[0].Name() == "evalsha" || cmds[0].Name() == "eval") && cmds[0].Err() == nil
		for _, c := range cmds {
			if w, ok := c.(*redis.Cmd); ok && c.Name() == "wait" {
				if ran && h.armed.CompareAndSwap(true, false) {
					w.SetErr(busyReply("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."))
				} else {
					w.SetErr(nil)
					w.SetVal(int64(1))
				}
			}
		}
		return err
	}
}

// TestReleaseWhoseWaitIsRefusedSucceeds: with WithReplicaAck, a release
// script runs and releases the hold, and the WAIT after it in its pipeline
// gets an error reply (BUSY). That reply is not the script's: were it
// reported as a *backend.ServerError, the release would take the attempt
// for one the server refused before it ran anything, and its retry,
// finding the hold gone, would report a hold it released as lost. Unlock
// returns nil.
func TestReleaseWhoseWaitIsRefusedSucceeds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv := harness.Standalone(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	h := &waitHook{}
	c.AddHook(h)
	b := goredis.New(c, goredis.WithReplicaAck(1, 10*time.Millisecond))
	defer b.Close()
	name := "wait-refused-" + dsync.NewID()[:8]
	m := mutex.New(b, name, mutex.WithLogger(nil))
	o := dsync.WithOwner(ctx)
	// Load the scripts: an EVALSHA that met NOSCRIPT ran nothing.
	if err := m.LockContext(o); err != nil {
		t.Fatal(err)
	}
	if err := m.UnlockContext(o); err != nil {
		t.Fatal(err)
	}
	if err := m.LockContext(o); err != nil {
		t.Fatal(err)
	}
	h.armed.Store(true)
	err := m.UnlockContext(o)
	if h.armed.Load() {
		t.Fatal("the release's WAIT was never answered with BUSY")
	}
	if n, xerr := c.Exists(ctx, "dsync:mutex:{"+name+"}").Result(); xerr != nil || n != 0 {
		t.Fatalf("the lock key after the unlock: EXISTS %d, %v", n, xerr)
	}
	if err != nil {
		t.Errorf("Unlock whose script released the hold and whose WAIT got an error reply: %v; want nil", err)
	}
}
