package testserver

import (
	"flag"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Main runs a package's tests: most of dsync's tests wait on the server or
// the clock rather than the CPU, so unless -test.parallel is given it lets
// 16 parallel tests run at once. It stops the shared servers afterwards,
// then runs stop (for servers of the caller's own), and fails the run if a
// goroutine was left behind.
func Main(m *testing.M, stop ...func()) { MainWith(m, nil, stop...) }

// MainWith is Main whose leak check ignores the goroutines that leaks
// name: a test dependency's own, which it may leave behind whatever its
// user does (see tests/fault).
func MainWith(m *testing.M, leaks []goleak.Option, stop ...func()) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "test.parallel" {
			set = true
		}
	})
	if !set {
		flag.Set("test.parallel", "16")
	}
	// Examples run against a private redis-server, and cannot skip: without
	// one, only tests run (they skip, or fail under DSYNC_REQUIRE_REDIS=1).
	if run := flag.Lookup("test.run"); !RedisAvailable() && !RequireRedis() && run != nil && run.Value.String() == "" {
		flag.Set("test.run", "^Test")
		os.Stderr.WriteString("testserver: redis-server is not on PATH; examples do not run\n")
	}
	code := m.Run()
	StopShared()
	for _, f := range stop {
		f()
	}
	if code == 0 {
		if err := goleak.Find(leaks...); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}
