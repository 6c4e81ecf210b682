package mutex_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gomodule/redigo/redis"

	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/tests/fake"
)

// The pub/sub connection is unresponsive (silently dead peer, not yet
// detected by the 15s health check) while script calls work. Lock with a
// context that has no deadline must keep waiting; it fails instead with
// context.DeadlineExceeded from the hub's private 10s subscribe timeout.
func TestFakeTimeStalledPubSubDoesNotFailLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fake.Fake(t)
		holder := mutex.New(fake.FakeBackend(t, srv), "x")
		holder.Lock()

		var blackhole atomic.Bool
		var peers []net.Conn
		pool := &redis.Pool{MaxIdle: 4, Dial: func() (redis.Conn, error) {
			if blackhole.Load() {
				c1, c2 := net.Pipe()
				peers = append(peers, c2)
				go io.Copy(io.Discard, c2) // accepts, never answers
				return redis.NewConn(c1, 0, 0), nil
			}
			c, err := srv.Dial()
			if err != nil {
				return nil, err
			}
			return redis.NewConn(c, 0, 0), nil
		}}
		b := bredigo.New(pool)
		defer func() {
			b.Close()
			pool.Close()
			for _, p := range peers {
				p.Close()
			}
		}()
		m := mutex.New(b, "x")
		if ok, err := m.TryLockContext(context.Background()); ok || err != nil { // warms the pool
			t.Fatal(ok, err)
		}
		blackhole.Store(true) // from now on only the pub/sub dial is affected

		start := time.Now()
		errc := make(chan error, 1)
		go func() { errc <- m.LockContext(context.Background()) }()
		select {
		case err := <-errc:
			t.Fatalf("LockContext(Background) gave up after %v: %v (DeadlineExceeded=%v); Lock() would panic",
				time.Since(start), err, errors.Is(err, context.DeadlineExceeded))
		case <-time.After(time.Minute):
		}
		holder.Unlock()
		<-errc
	})
}
