package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dsyncgo/dsync/internal/testserver"
)

// The benchmarks start a private redis-server, or use $DSYNC_REDIS_ADDR;
// without either they skip. Names follow benchstat's key=value form:
//
//	go test -run '^$' -bench . -count 6 ./bench | tee new.txt && benchstat new.txt

var server *testserver.Server

// workerEnv makes the test binary a contender process (see Spawn).
const workerEnv = "DSYNC_BENCH_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) == "1" {
		if err := Worker(context.Background(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if server != nil {
		server.Stop()
	}
	if err := goleak.Find(); code == 0 && err != nil {
		fmt.Fprintln(os.Stderr, "goleak:", err)
		code = 1
	}
	os.Exit(code)
}

func addr(b *testing.B) string {
	b.Helper()
	if server == nil {
		if !testserver.RedisAvailable() {
			b.Skip("redis-server not on PATH and DSYNC_REDIS_ADDR not set")
		}
		s, err := testserver.StartRedis()
		if err != nil {
			b.Fatal(err)
		}
		server = s
	}
	return server.Addr()
}

func impls(b *testing.B, f func(b *testing.B, impl Impl)) {
	for _, impl := range Impls() {
		b.Run("impl="+impl.Name, func(b *testing.B) { f(b, impl) })
	}
}

func BenchmarkUncontended(b *testing.B) {
	a := addr(b)
	impls(b, func(b *testing.B, impl Impl) {
		b.ReportAllocs()
		b.ResetTimer()
		r, err := Uncontended(context.Background(), a, impl, b.N)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(r.PerAcq(r.RoundTrips), "rtt/op")
		b.ReportMetric(r.PerAcq(r.ServerCalls), "server-calls/op")
	})
}

// BenchmarkRWLockUncontended is the uncontended cycle of each side of the
// rwlock, RLock+RUnlock (impl=dsync-rlock) and Lock+Unlock
// (impl=dsync-wlock), beside the mutex's (impl=dsync) in the same run.
func BenchmarkRWLockUncontended(b *testing.B) {
	a := addr(b)
	for _, impl := range []Impl{dsyncMutexImpl(), RWImpls()[2], WLockImpl} {
		b.Run("impl="+impl.Name, func(b *testing.B) {
			r, err := Uncontended(context.Background(), a, impl, b.N)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(r.PerAcq(r.RoundTrips), "rtt/op")
			b.ReportMetric(r.PerAcq(r.ServerCalls), "server-calls/op")
		})
	}
}

// spawn starts this test binary as a contender process.
func spawn() *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), workerEnv+"=1")
	cmd.Stderr = os.Stderr
	return cmd
}

// spawnFor returns spawn if procs asks for processes of their own, nil for
// goroutines of this one.
func spawnFor(procs int) Spawn {
	if procs > 1 {
		return spawn
	}
	return nil
}

// BenchmarkContended runs 8 contenders, each in a process of its own
// (procs=8), as in `dsync bench`, or as goroutines of this one (procs=1),
// each with a client of its own as a process has (the goroutine rows of
// `dsync bench` share one client instead; see GoroutineImpls). With
// processes, b.N is each contender's number of acquisitions.
func BenchmarkContended(b *testing.B) {
	a := addr(b)
	for _, procs := range []int{8, 1} {
		for _, hold := range []time.Duration{0, time.Millisecond} {
			b.Run(fmt.Sprintf("procs=%d/hold=%v", procs, hold), func(b *testing.B) {
				impls(b, func(b *testing.B, impl Impl) {
					b.ResetTimer()
					r, err := Contended(context.Background(), a, impl, 8, hold, 0, int64(b.N), spawnFor(procs))
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(r.Rate(), "acq/s")
					b.ReportMetric(float64(percentile(r.Waits, 0.5).Microseconds()), "p50-wait-µs")
					b.ReportMetric(float64(percentile(r.Waits, 0.99).Microseconds()), "p99-wait-µs")
					b.ReportMetric(r.PerAcq(r.Commands), "cmds/acq")
					b.ReportMetric(r.PerAcq(r.ServerCalls), "server-calls/acq")
					b.ReportMetric(float64(r.GiveUps), "give-ups")
				})
			})
		}
	}
}

// BenchmarkReadWrite runs the read-write workload (see RWImpls): 8
// contenders in processes of their own, 1ms hold, ReadShare of the
// rwlock's cycles reading, the mutex's all exclusive; and the uncontended
// cycle of each.
func BenchmarkReadWrite(b *testing.B) {
	a := addr(b)
	for _, impl := range RWImpls() {
		b.Run("uncontended/impl="+impl.Name, func(b *testing.B) {
			r, err := Uncontended(context.Background(), a, impl, b.N)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(r.PerAcq(r.RoundTrips), "rtt/op")
			b.ReportMetric(r.PerAcq(r.ServerCalls), "server-calls/op")
		})
	}
	for _, impl := range RWImpls() {
		b.Run("contended/impl="+impl.Name, func(b *testing.B) {
			r, err := Contended(context.Background(), a, impl, 8, time.Millisecond, 0, int64(b.N), spawn)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(r.Rate(), "acq/s")
			b.ReportMetric(float64(percentile(r.Waits, 0.99).Microseconds()), "p99-wait-µs")
			b.ReportMetric(r.PerAcq(r.Commands), "cmds/acq")
		})
	}
}

// BenchmarkHandoff times release to next holder with the waiter in a
// process of its own (procs=2) or in this one (procs=1).
func BenchmarkHandoff(b *testing.B) {
	a := addr(b)
	for _, procs := range []int{2, 1} {
		b.Run(fmt.Sprintf("procs=%d", procs), func(b *testing.B) {
			impls(b, func(b *testing.B, impl Impl) {
				b.ResetTimer()
				r, err := Handoff(context.Background(), a, impl, b.N, spawnFor(procs))
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(percentile(r.Waits, 0.5).Microseconds()), "median-µs")
				b.ReportMetric(float64(percentile(r.Waits, 0.99).Microseconds()), "p99-µs")
			})
		})
	}
}

// BenchmarkSemaphore runs the semaphore scenario: 16 contenders, each in a
// process of its own (procs=16) or goroutines of this one (procs=1), take
// one of SemaphoreCapacity permits (impl=dsync-sem4), or the dsync mutex
// (impl=dsync), and hold it 1ms. With processes, b.N is each contender's
// number of acquisitions.
func BenchmarkSemaphore(b *testing.B) {
	a := addr(b)
	for _, procs := range []int{16, 1} {
		b.Run(fmt.Sprintf("procs=%d", procs), func(b *testing.B) {
			for _, impl := range []Impl{dsyncMutexImpl(), SemImpl} {
				b.Run("impl="+impl.Name, func(b *testing.B) {
					b.ResetTimer()
					r, err := Contended(context.Background(), a, impl, 16, time.Millisecond, 0, int64(b.N), spawnFor(procs))
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(r.Rate(), "acq/s")
					b.ReportMetric(float64(percentile(r.Waits, 0.99).Microseconds()), "p99-wait-µs")
					b.ReportMetric(r.PerAcq(r.Commands), "cmds/acq")
				})
			}
		})
	}
}

// BenchmarkSemaphoreUncontended is acquire+release of one permit, alone.
func BenchmarkSemaphoreUncontended(b *testing.B) {
	r, err := Uncontended(context.Background(), addr(b), SemImpl, b.N)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(r.PerAcq(r.RoundTrips), "rtt/op")
	b.ReportMetric(r.PerAcq(r.ServerCalls), "server-calls/op")
}
