package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/mutex"
)

// The comment above each test describes the defect it pins; the test
// failed on 9f3ece2, before the fix.

// hookProxy forwards connections to addr and runs hook once, just before
// forwarding the first client write that contains every one of marks.
type hookProxy struct {
	ln    net.Listener
	addr  string
	marks []string
	hook  func()
	once  sync.Once
	wg    sync.WaitGroup
}

func newHookProxy(t *testing.T, addr string, hook func(), marks ...string) *hookProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &hookProxy{ln: ln, addr: addr, marks: marks, hook: hook}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *hookProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.addr)
		if err != nil {
			c.Close()
			continue
		}
		p.wg.Add(2)
		go func() { defer p.wg.Done(); io.Copy(c, s); c.Close() }()
		go func() {
			defer p.wg.Done()
			defer s.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					chunk := buf[:n]
					// Clients spell commands in either case (redigo
					// EVALSHA, go-redis evalsha).
					all := true
					for _, m := range p.marks {
						all = all && bytes.Contains(bytes.ToLower(chunk), bytes.ToLower([]byte(m)))
					}
					if all {
						p.once.Do(p.hook)
					}
					if _, err := s.Write(chunk); err != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

// TestForceUnlockSparesHolderTakenAfterCheck: force-unlock reads the holder,
// asks (or not, with -yes), reads it again to "unlock only the holder
// that was named", then sends the force script, which frees whoever holds
// the lock by then. When the named holder releases and another owner takes
// the lock between the last read and the force (one round trip), the new
// holder, never named to the operator, is force-unlocked, and the command
// reports "it was held by <the old holder>". The check is not atomic with
// the force: the script should take the expected holder and token.
func TestForceUnlockSparesHolderTakenAfterCheck(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stdin string
		flags []string
	}{
		{"confirmed", "y\n", nil},
		{"yes", "", []string{"-yes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := startMini(t)
			const name = "jobs:race"
			ctxA := dsync.WithOwner(context.Background())
			ctxB := dsync.WithOwner(context.Background())
			holderA, _ := dsync.OwnerFrom(ctxA)
			holderB, _ := dsync.OwnerFrom(ctxB)
			a := mutex.New(newBackend(t, m.Addr()), name, mutex.WithLogger(nil))
			b := mutex.New(newBackend(t, m.Addr()), name, mutex.WithLogger(nil))
			if err := a.LockContext(ctxA); err != nil {
				t.Fatal(err)
			}
			// Just before the force script reaches the server: A releases,
			// B takes the lock.
			p := newHookProxy(t, m.Addr(), func() {
				if err := a.UnlockContext(ctxA); err != nil {
					t.Error(err)
				}
				if err := b.LockContext(ctxB); err != nil {
					t.Error(err)
				}
			}, "EVAL", ":queue", ":wake")
			args := append([]string{"force-unlock", "-redis", p.ln.Addr().String(), name}, tc.flags...)
			code, stdout, stderr := runCmd(t, tc.stdin, args...)
			if !strings.Contains(stderr+stdout, holderA) {
				t.Fatalf("exit %d; the command never named holder A\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			n, err := b.HoldCount(ctxB)
			if err != nil {
				t.Fatal(err)
			}
			if n != 1 {
				t.Errorf("force-unlock named holder A (%s) and exited %d with %q, but force-unlocked B (%s), which took the lock after the check: B's HoldCount = %d",
					holderA, code, strings.TrimSpace(stdout), holderB, n)
			} else {
				b.UnlockContext(ctxB)
			}
		})
	}
}
