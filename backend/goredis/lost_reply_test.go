package goredis_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend/goredis"
	"github.com/dsyncgo/dsync/conformance/harness"
	"github.com/dsyncgo/dsync/mutex"
)

// cutProxy forwards connections to a server, and once armed with a
// command's name, cuts the connection that sent the next command line
// with that name after the server received it, before its reply reaches
// the client: the command ran, and the client sees its connection closed,
// which go-redis answers by sending the command again on another (see
// its MaxRetries).
type cutProxy struct {
	ln       net.Listener
	upstream string
	armed    atomic.Value // string: the command's name, upper case, or ""
	cuts     atomic.Int32
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
}

func newCutProxy(t *testing.T, upstream string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, upstream: upstream}
	p.armed.Store("")
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *cutProxy) Addr() string { return p.ln.Addr().String() }

// arm makes the proxy cut the connection of the next command called cmd
// once the server has it.
func (p *cutProxy) arm(cmd string) { p.armed.Store(strings.ToUpper(cmd)) }

func (p *cutProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *cutProxy) track(cs ...net.Conn) {
	p.mu.Lock()
	p.conns = append(p.conns, cs...)
	p.mu.Unlock()
}

func (p *cutProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.upstream)
		if err != nil {
			c.Close()
			continue
		}
		p.track(c, s)
		var cutting atomic.Bool
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			p.down(c, s, &cutting)
			c.Close()
		}()
		go func() {
			defer p.wg.Done()
			p.up(c, s, &cutting)
			s.Close()
		}()
	}
}

// up copies the client's commands to the server, and sets cutting before
// it writes an armed command.
func (p *cutProxy) up(c, s net.Conn, cutting *atomic.Bool) {
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			want, _ := p.armed.Load().(string)
			if want != "" && strings.Contains(strings.ToUpper(string(chunk)), "\r\n"+want+"\r\n") &&
				p.armed.CompareAndSwap(want, "") {
				cutting.Store(true)
			}
			if _, err := s.Write(chunk); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// down copies the server's replies to the client, unless cutting is set:
// then the reply is dropped and the client's connection closed.
func (p *cutProxy) down(c, s net.Conn, cutting *atomic.Bool) {
	buf := make([]byte, 64<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			if cutting.Load() {
				p.cuts.Add(1)
				return
			}
			if _, err := c.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestReleaseRetriedByClientSucceeds: a mutex's release runs on the
// server (the plain hold's GET and DEL), its reply is lost with the
// connection, and go-redis sends the script again, which finds nothing:
// the unlock released the hold, and must say so rather than report
// ErrNotHeld.
func TestReleaseRetriedByClientSucceeds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv := harness.Standalone(t)
	p := newCutProxy(t, srv.Addr())
	c := redis.NewClient(&redis.Options{Addr: p.Addr()})
	defer c.Close()
	b := goredis.New(c)
	defer b.Close()
	name := "release-retried-" + dsync.NewID()[:8]
	m := mutex.New(b, name, mutex.WithLogger(nil))
	// Load the scripts: a cut EVALSHA that met NOSCRIPT ran nothing.
	if err := m.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.UnlockContext(ctx); err != nil {
		t.Fatal(err)
	}
	for _, owned := range []bool{false, true} {
		lctx := ctx
		if owned {
			lctx = dsync.WithOwner(ctx)
		}
		if err := m.LockContext(lctx); err != nil {
			t.Fatal(err)
		}
		cuts := p.cuts.Load()
		p.arm("EVALSHA")
		err := m.UnlockContext(lctx)
		if p.cuts.Load() == cuts {
			t.Fatal("the proxy cut no connection: the release went another way")
		}
		if err != nil {
			t.Errorf("owned %v: Unlock whose first reply was lost and that go-redis retried: %v, want nil: the hold was released", owned, err)
		}
		if n, err := c.Exists(ctx, "dsync:mutex:{"+name+"}").Result(); err != nil || n != 0 {
			t.Errorf("owned %v: the lock key after the unlock: EXISTS %d, %v", owned, n, err)
		}
		if locked, err := m.IsLocked(ctx); err != nil || locked {
			t.Errorf("owned %v: IsLocked after the unlock: %v, %v", owned, locked, err)
		}
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("the test ran out of time")
	}
}
