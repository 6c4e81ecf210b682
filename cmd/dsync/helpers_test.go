package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/gomodule/redigo/redis"

	bredigo "github.com/dsyncgo/dsync/backend/redigo"
)

// runCmd runs dsync with args and stdin, and returns its exit status and
// output. It fails the test if the command takes over a minute.
func runCmd(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut syncBuffer
	code = runContext(ctx, args, strings.NewReader(stdin), &out, &errOut)
	if ctx.Err() != nil {
		t.Fatalf("dsync %q did not end within a minute", args)
	}
	return code, out.String(), errOut.String()
}

// startMini starts a miniredis, closed when t ends.
func startMini(t *testing.T) *miniredis.Miniredis {
	t.Helper()
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// newBackend returns a backend with a pool of its own on addr, closed
// when t ends: a separate process, as far as the lock is concerned.
func newBackend(t *testing.T, addr string) *bredigo.Backend {
	t.Helper()
	pool := &redis.Pool{
		MaxIdle: 4,
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			return redis.DialContext(ctx, "tcp", addr)
		},
	}
	b := bredigo.New(pool)
	t.Cleanup(func() {
		b.Close()
		pool.Close()
	})
	return b
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// watchWriter is a syncBuffer that closes seen once its content contains
// want.
type watchWriter struct {
	syncBuffer
	want string
	once sync.Once
	seen chan struct{}
}

func newWatchWriter(want string) *watchWriter {
	return &watchWriter{want: want, seen: make(chan struct{})}
}

func (w *watchWriter) Write(p []byte) (int, error) {
	n, err := w.syncBuffer.Write(p)
	if strings.Contains(w.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}
