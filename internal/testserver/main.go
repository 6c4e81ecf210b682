package testserver

import (
	"flag"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Main runs a package's tests: most of dsync's tests wait on the server or
// the clock rather than the CPU, so unless -test.parallel is given it lets
// 16 parallel tests run at once. It stops the shared servers afterwards and
// fails the run if a goroutine was left behind.
func Main(m *testing.M) {
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
	code := m.Run()
	StopShared()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// LeakOptions ignores the goroutines of an embedded server that a test
// restarted.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/alicebob/miniredis/v2/server.(*Server).serve"),
		goleak.IgnoreAnyFunction("github.com/alicebob/miniredis/v2/server.(*Server).servePeer"),
	}
}
