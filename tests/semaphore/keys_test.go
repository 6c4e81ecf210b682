package semaphore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync/internal/testserver"
)

// freeMarker reports whether v, a string key's value with ttl left, is
// what a free semaphore keeps of its state: its grant counter ("<grant>
// free", "<grant> free o"), for the rest of its last holder's lease, at
// most the default watchdog's 30s.
func freeMarker(v string, ttl time.Duration) bool {
	f := strings.Fields(v)
	return len(f) >= 2 && f[1] == "free" && ttl > 0 && ttl <= 30*time.Second
}

// keysLeft lists the keys of srv that match pattern, but for free
// markers (see freeMarker).
func keysLeft(t *testing.T, ctx context.Context, srv *testserver.Server, pattern string) []string {
	t.Helper()
	ks, err := redis.Strings(srv.Do(ctx, "KEYS", pattern))
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, k := range ks {
		v, _ := redis.String(srv.Do(ctx, "GET", k))
		pttl, _ := redis.Int64(srv.Do(ctx, "PTTL", k))
		if !freeMarker(v, time.Duration(pttl)*time.Millisecond) {
			left = append(left, k)
		}
	}
	return left
}

// fakeKeysLeft is keysLeft for every key of a miniredis server.
func fakeKeysLeft(srv *miniredis.Miniredis) []string {
	var left []string
	for _, k := range srv.Keys() {
		v, _ := srv.Get(k)
		if !freeMarker(v, srv.TTL(k)) {
			left = append(left, k)
		}
	}
	return left
}
