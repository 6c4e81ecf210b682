package conformance

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"go.uber.org/goleak"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	bredigo "github.com/dsyncgo/dsync/backend/redigo"
)

// slowMember is how long a slowed member's first attempt takes to fail:
// past the member timeout of every RedLock these cases make (a twentieth
// of a lease of at most 2.7s).
const slowMember = 200 * time.Millisecond

// slowFirst fails the first Eval on each of its members (by the suffix of
// their keys' names, "release-c") past the RedLock's member timeout,
// unapplied (a loaded machine): with one member slowed, the group's first
// take holds a majority only and groupUnits.lock retries; with two, the
// RedLock's first round fails and gives back the member it took.
type slowFirst struct {
	backend.Backend
	slowed map[string]*atomic.Bool // member -> its first Eval was slowed
}

func (b *slowFirst) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	for _, k := range keys {
		for m, done := range b.slowed {
			if strings.Contains(k, m) && done.CompareAndSwap(false, true) {
				select {
				case <-time.After(slowMember):
					return nil, fmt.Errorf("slow member: %w", context.DeadlineExceeded)
				case <-ctx.Done():
					return nil, fmt.Errorf("slow member: %w", ctx.Err())
				}
			}
		}
	}
	return b.Backend.Eval(ctx, s, keys, args...)
}

// all reports whether every member's first Eval was slowed.
func (b *slowFirst) all() bool {
	for _, done := range b.slowed {
		if !done.Load() {
			return false
		}
	}
	return true
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A RedLock release case whose group take held a majority only (member
// c's attempt outlasted its timeout, as on a loaded machine): the hold is
// given back and taken again with every member, and the ends of the hold
// given back are not counted as the case's.
func TestReleaseCasesTakeEveryRedLockMember(t *testing.T) {
	s, slow := slowMemberSuite(t, "release-c")
	s.testReleaseStalledKeepsDeadline(t, context.Background(), groupReleases(true))
	if !slow.all() {
		t.Fatal("member c's first attempt was not slowed: the retry was not exercised")
	}
}

// A RedLock release case whose group take lost a round (members b and c
// outlasted their timeouts): the member the round took and gave back
// ends a hold that is not the case's, and is not counted as its.
func TestReleaseCasesCountNoEndOfALostRound(t *testing.T) {
	s, slow := slowMemberSuite(t, "release-b", "release-c")
	s.testReleaseStalledKeepsDeadline(t, context.Background(), groupReleases(true))
	if !slow.all() {
		t.Fatal("members b and c's first attempts were not slowed: no round was lost")
	}
}

// The cases that time a lease count it from the take that holds: a group
// take that held a majority only and was taken again does not count.
func TestReleaseCasesTimeTheTakeThatHolds(t *testing.T) {
	s, slow := slowMemberSuite(t, "release-c")
	r := s.releaseRig(t, groupReleases(true), lockConfig{watchdog: releaseLease})
	o := dsync.WithOwner(context.Background())
	called := time.Now()
	took := lockTimed(t, r.holder, o)
	if !slow.all() {
		t.Fatal("member c's first attempt was not slowed: the retry was not exercised")
	}
	if took.Sub(called) < slowMember {
		t.Errorf("lockTimed counts the lease from %v after the call; want at least %v, after the first take that was given back", took.Sub(called), slowMember)
	}
	must(t, r.holder.unlock(o, 1), "unlock")
}

// slowMemberSuite returns a suite over a redis-server of its own, whose
// first backend (a release rig's holder's) fails the first attempt of
// each of members (see slowFirst).
func slowMemberSuite(t *testing.T, members ...string) (*suite, *slowFirst) {
	// A server of its own on a unix socket: package harness, which
	// starts servers for every other test, imports this one.
	sock := filepath.Join(t.TempDir(), "redis.sock")
	cmd := exec.Command("redis-server", "--port", "0", "--unixsocket", sock, "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		if os.Getenv("DSYNC_REQUIRE_REDIS") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	dial := func() (redis.Conn, error) { return redis.Dial("unix", sock) }
	for i := 0; ; i++ {
		c, err := dial()
		if err == nil {
			c.Close()
			break
		}
		if i == 500 {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	slow := &slowFirst{slowed: make(map[string]*atomic.Bool)}
	for _, m := range members {
		slow.slowed[m] = new(atomic.Bool)
	}
	nb := func(t *testing.T) backend.Backend {
		pool := &redis.Pool{Dial: dial}
		b := bredigo.New(pool)
		t.Cleanup(func() { b.Close(); pool.Close() })
		if slow.Backend == nil { // the rig's holder
			slow.Backend = b
			return slow
		}
		return b
	}
	s, _ := newSuite(t, nb, nil)
	return s, slow
}
