package mutex_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/tests/fake"
	"github.com/gomodule/redigo/redis"
)

// Where the comment above a test describes a defect, the test pins its
// fix: it failed before the fix and asserts the contrary.

// TestUnreachableServerIsLogged: defect 9, LockContext against an unreachable server retries silently.
func TestUnreachableServerIsLogged(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there any more
	pool := &redis.Pool{DialContext: func(ctx context.Context) (redis.Conn, error) {
		return redis.DialContext(ctx, "tcp", addr)
	}}
	b := bredigo.New(pool)
	defer pool.Close()
	defer b.Close()
	logs := &logRecords{}
	name := uniqueName("unreachable")
	m := mutex.New(b, name, mutex.WithLogger(logs.logger()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := m.LockContext(ctx); err == nil {
		t.Fatal("LockContext on an unreachable server succeeded")
	} else {
		t.Logf("LockContext: %v", err)
	}
	warns, all := logs.count(slog.LevelWarn, name), logs.count(slog.LevelWarn, "")
	if warns == 0 {
		t.Errorf("no Warn record naming %q in 2s of failed attempts on an unreachable server; logged:%v", name, logs)
	}
	if all > 3 {
		t.Errorf("%d Warn records in 2s: want the warning rate-limited (once, then rarely):%v", all, logs)
	}
}

// TestContextErrorsNameOperation: defect 10, an ended ctx makes LockContext, TryLockContext and State return a bare ctx.Err() that names neither the operation nor the mutex.
func TestContextErrorsNameOperation(t *testing.T) {
	b := fake.Mini(t).NewBackend(t)
	name := uniqueName("ctxerr")
	m := mutex.New(b, name)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{{"cancelled", cancelled}, {"expired", expired}} {
		for _, op := range []struct {
			name, word string // word: what the message must contain
			call       func(context.Context) error
		}{
			{"LockContext", "lock", m.LockContext},
			{"TryLockContext", "try", func(ctx context.Context) error { _, err := m.TryLockContext(ctx); return err }},
			{"State", "state", func(ctx context.Context) error { _, err := m.State(ctx); return err }},
		} {
			t.Run(c.name+"/"+op.name, func(t *testing.T) {
				err := op.call(c.ctx)
				if !errors.Is(err, c.ctx.Err()) {
					t.Errorf("%s error %v does not match %v", op.name, err, c.ctx.Err())
				}
				if err == nil {
					return
				}
				msg := err.Error()
				if !strings.Contains(msg, name) || !strings.Contains(strings.ToLower(msg), op.word) {
					t.Errorf("%s error %q must name the operation (%q) and the mutex (%q)", op.name, msg, op.word, name)
				}
			})
		}
	}
}
