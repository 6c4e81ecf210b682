package redigo_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/backend/redigo"
)

// gatedDialer is a pool's dialer whose connections numbered in stalled (the
// first dialed is 1) read nothing until open is called: a round trip on
// one stays in flight.
type gatedDialer struct {
	addr    string
	stalled map[int32]bool
	dials   atomic.Int32
	reading chan struct{} // receives once per stalled connection that starts to read
	gate    chan struct{}
	once    sync.Once
}

func newGatedDialer(addr string, stalled ...int32) *gatedDialer {
	d := &gatedDialer{addr: addr, stalled: map[int32]bool{}, reading: make(chan struct{}, len(stalled)), gate: make(chan struct{})}
	for _, n := range stalled {
		d.stalled[n] = true
	}
	return d
}

func (d *gatedDialer) dial() (redis.Conn, error) {
	nc, err := net.Dial("tcp", d.addr)
	if err != nil {
		return nil, err
	}
	if d.stalled[d.dials.Add(1)] {
		nc = &gatedConn{Conn: nc, d: d}
	}
	return redis.NewConn(nc, 0, 0), nil
}

func (d *gatedDialer) open() { d.once.Do(func() { close(d.gate) }) }

type gatedConn struct {
	net.Conn
	d       *gatedDialer
	started sync.Once
}

func (c *gatedConn) Read(p []byte) (int, error) {
	c.started.Do(func() { c.d.reading <- struct{}{} })
	<-c.d.gate
	return c.Conn.Read(p)
}

// stalledCall starts a call on b whose round trip stays on the wire (on a
// stalled connection of d) until d.open, and returns its result.
func stalledCall(t *testing.T, b *redigo.Backend, d *gatedDialer) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		r, err := b.Eval(context.Background(), first, nil)
		if err == nil && r != int64(1) {
			err = errors.New("wrong reply")
		}
		done <- err
	}()
	select {
	case <-d.reading:
	case err := <-done:
		t.Fatalf("a call returned before its round trip stalled: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("a call never reached the server")
	}
	return done
}

// Scripts whose replies tell the calls apart.
var (
	first  = backend.NewScript("return 1")
	second = backend.NewScript("return 2")
)
