package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync/backend"
	bredigo "github.com/dsyncgo/dsync/backend/redigo"
	"github.com/dsyncgo/dsync/internal/codec"
	"github.com/dsyncgo/dsync/mutex"
)

// releaseCall records the script calls a backend makes, so that the
// floor can replay the mutex's release with the keys and arguments the
// library sends, whatever the codec's header holds.
type releaseCall struct {
	backend.Backend
	keys []string
	args []any
}

func (r *releaseCall) Eval(ctx context.Context, s *backend.Script, keys []string, args ...any) (any, error) {
	r.keys, r.args = slices.Clone(keys), slices.Clone(args)
	return r.Backend.Eval(ctx, s, keys, args...)
}

// mutexRelease returns the keys and arguments of the mutex's release of
// an uncontended hold on the server at a, and the hold's plain value
// among them: the last script call of one lock+unlock. The recorder hides
// the adapter's SetNX, so that lock is the acquire script's, which stores
// the same plain value; the release is the same call either way.
func mutexRelease(b *testing.B, a string) (keys []string, args []any, plain string) {
	pool := redigoPool(a, new(counter))
	defer pool.Close()
	rec := &releaseCall{Backend: bredigo.New(pool)}
	defer rec.Close()
	m := mutex.New(rec, name("floor")) // the same length as the measured mutex's
	if err := m.LockContext(context.Background()); err != nil {
		b.Fatal(err)
	}
	if err := m.UnlockContext(context.Background()); err != nil {
		b.Fatal(err)
	}
	plain, ok := rec.args[codec.Plain].(string)
	if !ok || plain == "" {
		b.Fatalf("the release's argument %d is %v, not a plain value", codec.Plain, rec.args[codec.Plain])
	}
	return rec.keys, rec.args, plain
}

// BenchmarkRedisCPUFloor is the model behind the Redis CPU line of the
// uncontended table: what the server spends per pair of round trips with
// no lock at all, beside redsync's shape (SET NX, then a GET+DEL script),
// the same with dsync's key and plain value, the same with the arguments
// of dsync's pair, and the dsync mutex's pair, alternating in one run. redis-cpu-µs/op is
// the server process's CPU (INFO cpu: its system time is mostly the two
// reads and two writes); cmd-µs/op is what INFO commandstats counts
// inside the commands; in-bytes/op is what the client sent.
func BenchmarkRedisCPUFloor(b *testing.B) {
	a := addr(b)
	ad := admin{a}
	c, err := redis.Dial("tcp", a)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	trivial := redis.NewScript(1, "return 1")
	getDel := redis.NewScript(1, "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0")
	relKeys, relArgs, plain := mutexRelease(b, a)
	getDelArgs := redis.NewScript(len(relKeys), fmt.Sprintf("if redis.call('GET', KEYS[1]) == ARGV[%d] then return redis.call('DEL', KEYS[1]) end return 0", codec.Plain+1))
	var relCall []any
	for _, k := range relKeys {
		relCall = append(relCall, k)
	}
	relCall = append(relCall, relArgs...)
	m := newDsync(a, name("floor"), new(counter))
	defer m.Close()
	shapes := []struct {
		name string
		pair func() error
	}{
		{"two-pings", func() error {
			if _, err := c.Do("PING"); err != nil {
				return err
			}
			_, err := c.Do("PING")
			return err
		}},
		{"two-trivial-scripts", func() error {
			if _, err := trivial.Do(c, "floor:k"); err != nil {
				return err
			}
			_, err := trivial.Do(c, "floor:k")
			return err
		}},
		{"redsync-shape", func() error {
			if _, err := c.Do("SET", "floor:r", "v", "NX", "PX", 8000); err != nil {
				return err
			}
			_, err := getDel.Do(c, "floor:r", "v")
			return err
		}},
		// redsync's shape with dsync's key and plain value: a release
		// the size of redsync's (see README.md, "A release the size of
		// redsync's").
		{"redsync-shape-dsync-key", func() error {
			if _, err := c.Do("SET", relKeys[0], plain, "NX", "PX", 30000); err != nil {
				return err
			}
			_, err := getDel.Do(c, relKeys[0], plain)
			return err
		}},
		// redsync's shape with the arguments of dsync's pair: its plain
		// value, and the keys and arguments of the mutex's release.
		{"redsync-shape-dsync-args", func() error {
			if _, err := c.Do("SET", relKeys[0], plain, "NX", "PX", 30000); err != nil {
				return err
			}
			_, err := getDelArgs.Do(c, relCall...)
			return err
		}},
		{"dsync-mutex", func() error { return cycle(context.Background(), m, 0) }},
	}
	for _, s := range shapes {
		b.Run("shape="+s.name, func(b *testing.B) {
			for range 50 { // load scripts, warm the connection
				if err := s.pair(); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := ad.do("CONFIG", "RESETSTAT"); err != nil {
				b.Fatal(err)
			}
			cpu0, err := ad.cpu()
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if err := s.pair(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			cpu1, err := ad.cpu()
			if err != nil {
				b.Fatal(err)
			}
			usec, in := commandTime(b, ad)
			n := float64(b.N)
			b.ReportMetric(float64((cpu1-cpu0).Microseconds())/n, "redis-cpu-µs/op")
			b.ReportMetric(usec/n, "cmd-µs/op")
			b.ReportMetric(in/n, "in-bytes/op")
		})
	}
}

// commandTime returns the µs INFO commandstats counts in the commands run
// since the last CONFIG RESETSTAT, the harness's own left out, and the
// bytes the server read.
func commandTime(b *testing.B, ad admin) (usec, in float64) {
	s, err := redis.String(ad.do("INFO", "all"))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "total_net_input_bytes:"); ok {
			in, _ = strconv.ParseFloat(v, 64)
		}
		name, rest, ok := strings.Cut(line, ":calls=")
		if !ok || !strings.HasPrefix(name, "cmdstat_") || name == "cmdstat_info" || name == "cmdstat_config" {
			continue
		}
		_, rest, _ = strings.Cut(rest, "usec=")
		v, _, _ := strings.Cut(rest, ",")
		f, _ := strconv.ParseFloat(v, 64)
		usec += f
	}
	return usec, in
}
