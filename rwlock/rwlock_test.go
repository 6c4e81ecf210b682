package rwlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/internal/hub"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/internal/tripmeter"
	"github.com/dsyncgo/dsync/rwlock"
)

// childEnv carries a child reader's instructions: address, prefix, name
// and fixed lease, separated by spaces.
const childEnv = "DSYNC_RWLOCK_CHILD"

// maybeChild runs this test binary as a reader process when asked to, and
// reports whether it did: it takes a read hold on a fixed lease, says so
// on stdout and waits to be killed.
func maybeChild() bool {
	spec := os.Getenv(childEnv)
	if spec == "" {
		return false
	}
	f := strings.Fields(spec)
	leaseD, _ := time.ParseDuration(f[3])
	pool := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", f[0]) }}
	m := rwlock.New(bredigo.New(pool), f[2], rwlock.WithPrefix(f[1]), rwlock.WithLease(leaseD))
	if err := m.RLockContext(context.Background()); err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	fmt.Println("reading")
	time.Sleep(time.Minute)
	os.Exit(4)
	return true
}

// elsewhere makes scripts sent through a backend think their caller is
// another process, so that they wake this process's waiters through
// pub/sub.
type elsewhere struct{ backend.Backend }

func (e elsewhere) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	args = slices.Clone(args)
	for i, a := range args {
		if id, ok := a.(string); ok && hub.IsID(id) {
			args[i] = "elsewhere"
		}
	}
	return e.Backend.Eval(ctx, s, keys, args...)
}

func prefix() string { return "rwtest:" + dsync.NewID()[:8] }

// A reader whose process is killed stops blocking writers when its fixed
// lease ends, while a live reader's watchdog keeps that reader's own hold.
func TestKilledReaderFreesItsHold(t *testing.T) {
	const fixed, renewed = time.Second, 600 * time.Millisecond // renewed: a watchdog that keeps up under load
	srv := testserver.Real(t)
	ctx := context.Background()
	p := prefix()
	open := func(opts ...rwlock.Option) *rwlock.RWMutex {
		return rwlock.New(srv.NewBackend(t), "doc", append([]rwlock.Option{rwlock.WithPrefix(p)}, opts...)...)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(exe, "-test.run=^$")
	child.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s doc %v", childEnv, srv.Addr(), p, fixed))
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	line := make([]byte, 64)
	n, _ := out.Read(line)
	if got := strings.TrimSpace(string(line[:n])); got != "reading" {
		t.Fatalf("child reader: %q", got)
	}
	took := time.Now() // the child's hold began before this
	live, writer := open(rwlock.WithWatchdog(renewed)), open()
	live.RLock()
	child.Process.Kill()
	child.Wait()

	got := make(chan time.Time, 1)
	go func() {
		if err := writer.LockContext(ctx); err != nil {
			t.Error(err)
		}
		got <- time.Now()
	}()
	// The dead reader's hold ends with its lease; the live one stays.
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := writer.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Readers == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the killed reader still counts: %+v", st)
		}
		time.Sleep(time.Millisecond)
	}
	if d := time.Since(took); d > fixed+200*time.Millisecond {
		t.Errorf("the killed reader counted %v after its hold began; its lease was %v", d, fixed)
	}
	time.Sleep(3 * renewed)
	select {
	case <-live.RDone(ctx):
		t.Fatal("the live reader lost its hold")
	case <-got:
		t.Fatal("the writer got in past the live reader")
	default:
	}
	released := time.Now()
	live.RUnlock()
	select {
	case at := <-got:
		if d := at.Sub(released); d > 50*time.Millisecond {
			t.Errorf("the writer acquired %v after the last live reader released", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the writer never acquired")
	}
	writer.Unlock()

	// With no live reader, the writer gets in when the dead one's lease
	// ends.
	child = exec.Command(exe, "-test.run=^$")
	child.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s doc %v", childEnv, srv.Addr(), p, fixed))
	out, _ = child.StdoutPipe()
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	if n, _ = out.Read(line); strings.TrimSpace(string(line[:n])) != "reading" {
		t.Fatalf("child reader: %q", line[:n])
	}
	took = time.Now()
	child.Process.Kill()
	child.Wait()
	if err := writer.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(took); d > fixed+200*time.Millisecond {
		t.Errorf("the writer waited %v for a killed reader on a %v lease; want at most the lease + 200ms", d, fixed)
	}
	t.Logf("a killed reader blocked the writer %v (lease %v)", time.Since(took), fixed)
	writer.Unlock()
}

// Every waiting reader holds the lock within 50ms of a write release (on
// an idle machine; see testserver.TripMeter for a loaded one).
func TestReadersAcquireWithin50msOfWriteRelease(t *testing.T) {
	const readers = 8
	srv := testserver.Real(t)
	ctx := context.Background()
	p := prefix()
	// The writer acts as another process: its release wakes the readers
	// through pub/sub, not in-process.
	w := rwlock.New(elsewhere{srv.NewBackend(t)}, "doc", rwlock.WithPrefix(p))
	for round := range 5 {
		w.Lock()
		got := make(chan time.Time, readers)
		var rs []*rwlock.RWMutex
		for range readers {
			r := rwlock.New(srv.NewBackend(t), "doc", rwlock.WithPrefix(p))
			rs = append(rs, r)
			go func() {
				if err := r.RLockContext(ctx); err != nil {
					t.Error(err)
				}
				got <- time.Now()
			}()
		}
		for i := 0; ; i++ {
			st, err := w.State(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.WaitingReaders == readers {
				break
			}
			if i > 5000 {
				t.Fatalf("readers not waiting: %+v", st)
			}
			time.Sleep(time.Millisecond)
		}
		// On a loaded machine the release's round trip, the publication
		// and the readers' wake-up may each wait for a CPU as long as a
		// round trip timed meanwhile did: the bound allows three of those.
		trips := tripmeter.Start(t, context.Background(), srv.NewBackend(t))
		released := time.Now()
		w.Unlock()
		var worst time.Duration
		for range readers {
			select {
			case at := <-got:
				worst = max(worst, at.Sub(released))
			case <-time.After(5 * time.Second):
				t.Fatal("a reader never acquired")
			}
		}
		slow := trips.Stop()
		t.Logf("round %d: the last of %d readers acquired %v after the write release (longest round trip meanwhile %v)", round, readers, worst, slow)
		if worst > 50*time.Millisecond+3*slow {
			t.Errorf("round %d: the last reader acquired %v after the write release; want within 50ms, and three times %v more for the longest round trip timed meanwhile", round, worst, slow)
		}
		for _, r := range rs {
			r.RUnlock()
		}
	}
}

// The server refuses an upgrade too, at once, for a read hold the process
// does not know to be on that server: here one kept through another
// backend value of the same server, which no call through this one has
// shown to reach it.
func TestServerRefusesUpgrade(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(dsync.WithOwner(context.Background()), 5*time.Second)
	defer cancel()
	p := prefix()
	reader := rwlock.New(srv.NewBackend(t), "up", rwlock.WithPrefix(p))
	writer := rwlock.New(srv.NewBackend(t), "up", rwlock.WithPrefix(p))
	if err := reader.RLockContext(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := writer.LockContext(ctx); !errors.Is(err, dsync.ErrUpgrade) {
		t.Errorf("write acquisition by a reader, through another backend value: %v, want ErrUpgrade", err)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("the refusal took %v; it must not wait", d)
	}
	if st, err := reader.State(ctx); err != nil || st.ReadCount != 1 || st.WaitingWriters != 0 || st.Mode != rwlock.Read {
		t.Errorf("after the refusal: %+v, %v; want the read hold alone, nothing queued", st, err)
	}
	if err := reader.RUnlockContext(ctx); err != nil {
		t.Fatal(err)
	}
}
