package harness

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// SlowProxy stands between clients and a server on loopback and delays
// what the server sends by a latency the test sets: a loaded or distant
// server, which answers every call, only late. What the clients send
// passes at once.
type SlowProxy struct {
	ln      net.Listener
	target  string
	latency atomic.Int64 // nanoseconds

	mu     sync.Mutex
	conns  []net.Conn
	closed bool
	wg     sync.WaitGroup
}

// NewSlowProxy starts a proxy to the server at addr, with no latency; it
// stops, closing every connection through it, when t ends.
func NewSlowProxy(t testing.TB, addr string) *SlowProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &SlowProxy{ln: ln, target: addr}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is where clients connect.
func (p *SlowProxy) Addr() string { return p.ln.Addr().String() }

// SetLatency delays, from now on, each chunk of the server's replies by d
// from when the proxy read it.
func (p *SlowProxy) SetLatency(d time.Duration) { p.latency.Store(int64(d)) }

func (p *SlowProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, s) {
			return
		}
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			io.Copy(s, c)
			s.Close()
			c.Close()
		}()
		go func() {
			defer p.wg.Done()
			p.delay(c, s)
			s.Close()
			c.Close()
		}()
	}
}

// track records a pair of connections to close with the proxy; it
// reports false, having closed them, if the proxy is closed.
func (p *SlowProxy) track(c, s net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		s.Close()
		return false
	}
	p.conns = append(p.conns, c, s)
	return true
}

// chunk is a read from the server, and when it may go on to the client.
type chunk struct {
	b   []byte
	due time.Time
}

// delay copies from the server s to the client c, each chunk once its
// latency has passed, in order.
func (p *SlowProxy) delay(c, s net.Conn) {
	q := make(chan chunk, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ch := range q {
			time.Sleep(time.Until(ch.due))
			if _, err := c.Write(ch.b); err != nil {
				for range q { // drain until the reader ends
				}
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			q <- chunk{b: append([]byte(nil), buf[:n]...), due: time.Now().Add(time.Duration(p.latency.Load()))}
		}
		if err != nil {
			break
		}
	}
	close(q)
	<-done
}

func (p *SlowProxy) close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	p.ln.Close()
	for _, c := range conns {
		c.Close()
	}
	p.wg.Wait()
}
