package main

import (
	"flag"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{
		{"-h"}, {"-help"}, {"--help"}, {"help"}, {"help", "inspect"},
	} {
		code, stdout, stderr := runCmd(t, "", args...)
		if code != exitOK || !strings.Contains(stdout, "usage") {
			t.Errorf("dsync %q: exit %d, want 0 and usage on stdout\nstdout:\n%s\nstderr:\n%s", args, code, stdout, stderr)
		}
	}
	for _, c := range commands {
		if c.hidden {
			continue
		}
		for _, h := range []string{"-h", "-help", "--help"} {
			code, stdout, stderr := runCmd(t, "", c.name, h)
			if code != exitOK || !strings.Contains(stdout, "usage: dsync "+c.name) || !strings.Contains(stdout, "-redis") {
				t.Errorf("dsync %s %s: exit %d, want 0 and usage on stdout\nstdout:\n%s\nstderr:\n%s", c.name, h, code, stdout, stderr)
			}
		}
		// -h after a positional argument, as flags may follow the name.
		if code, _, _ := runCmd(t, "", c.name, "somename", "-h"); code != exitOK {
			t.Errorf("dsync %s somename -h: exit %d, want 0", c.name, code)
		}
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"help", "frobnicate"},
		{"-x"},
		{"inspect"},
		{"inspect", "-redis", "127.0.0.1:1"},
		{"inspect", "name"},
		{"inspect", "-redis", "127.0.0.1:1", "a", "b"},
		{"inspect", "-redis", "127.0.0.1:1", "a", "-b"},
		{"inspect", "-bogus", "name"},
		{"inspect", "-redis", "127.0.0.1:1", "-kind", "leader", "name"},
		{"inspect", "-redis", "127.0.0.1:1", "-timeout", "0s", "name"},
		{"inspect", "-redis", "127.0.0.1:1", "-prefix", "a{b", "name"},
		{"inspect", "-redis", "127.0.0.1:1", strings.Repeat("x", 2000)},
		{"list"},
		{"list", "-redis", "127.0.0.1:1", "extra"},
		{"list", "-redis", "127.0.0.1:1", "-kind", "Mutex"},
		{"force-unlock", "-redis", "127.0.0.1:1"},
		{"force-unlock", "name"},
		{"force-unlock", "-redis", "127.0.0.1:1", "-yes=maybe", "name"},
		{"demo", "-workers", "0"},
		{"demo", "-nope"},
		{"demo", "extra"},
		{"bench", "-contenders", "0"},
		{"bench", "-hold", "soon"},
		{"bench", "extra"},
		{"run"},
		{"run", "name"},
		{"run", "name", "--"},
		{"run", "-lease", "0s", "name", "--", "true"},
		{"run", "-grace", "-1s", "name", "true"},
		{"run", "-wait", "-1s", "name", "true"},
		{"run", "-wait", "soon", "name", "true"},
		{"run", "-prefix", "a{b", "name", "true"},
		{"run", "-redis", "", "name", "true"},
		{"run", "-bogus", "name", "true"},
		{"doctor", "extra"},
		{"doctor", "-timeout", "0s"},
		{"doctor", "-redis", ""},
		{"doctor", "-prefix", "a}b"},
	} {
		code, stdout, stderr := runCmd(t, "", args...)
		if code != exitUsage {
			t.Errorf("dsync %q: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, code, exitUsage, stdout, stderr)
		}
		if stderr == "" {
			t.Errorf("dsync %q: nothing on stderr", args)
		}
	}
}

func TestFailureExitsOne(t *testing.T) {
	addr := closedAddr(t)
	for _, args := range [][]string{
		{"inspect", "-redis", addr, "name"},
		{"list", "-redis", addr},
		{"force-unlock", "-yes", "-redis", addr, "name"},
		{"demo", "-redis", addr},
		{"bench", "-redis", addr},
		{"doctor", "-redis", addr},
	} {
		code, stdout, stderr := runCmd(t, "", args...)
		if code != exitFailure {
			t.Errorf("dsync %q: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, code, exitFailure, stdout, stderr)
		}
		if !strings.Contains(stderr, addr) {
			t.Errorf("dsync %q: stderr does not name the server: %s", args, stderr)
		}
	}
}

// closedAddr returns a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// silentServer listens on loopback, accepts connections and never reads
// or answers. It stops when t ends.
func silentServer(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// TestUnansweringServer: a server that accepts and never answers is an
// error within seconds, for every command that talks to a server.
func TestUnansweringServer(t *testing.T) {
	addr := silentServer(t)
	for _, args := range [][]string{
		{"inspect", "-redis", addr, "orders:42"},          // the default timeout
		{"inspect", "orders:42", "-redis", addr, "-json"}, // flags after the name
		{"list", "-redis", addr, "-timeout", "500ms"},     //
		{"force-unlock", "-redis", addr, "-timeout", "500ms", "-yes", "x"},
		{"demo", "-redis", addr, "-timeout", "500ms"},
		{"bench", "-redis", addr, "-timeout", "500ms"},
		{"doctor", "-redis", addr, "-timeout", "500ms"},
	} {
		failsWithin(t, args)
	}
}

// failsSoon is how soon a command must fail against a server that does
// not answer. It waits out two timeouts, the call's and the probe's that
// tells a server that answers only in TLS apart (connectError); a third
// allows for a loaded machine.
const failsSoon = 3 * defaultTimeout

// failsWithin runs dsync with args beside the other commands of t, in a
// subtest, and fails it unless the command fails within failsSoon: each
// waits on timeouts of its own.
func failsWithin(t *testing.T, args []string) {
	var name []string // args without the server's address, which changes
	for i, a := range args {
		if a != "-redis" && (i == 0 || args[i-1] != "-redis") {
			name = append(name, a)
		}
	}
	t.Run(strings.Join(name, " "), func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		code, stdout, stderr := runCmd(t, "", args...)
		took := time.Since(start)
		if code == exitOK || took > failsSoon {
			t.Errorf("dsync %q: exit %d after %v, want non-zero within %v\nstdout:\n%s\nstderr:\n%s", args, code, took, failsSoon, stdout, stderr)
		}
		t.Logf("dsync %q: exit %d after %v: %s", args, code, took.Round(time.Millisecond), strings.TrimSpace(stderr))
	})
}

func TestParseRun(t *testing.T) {
	for _, c := range []struct {
		args    []string
		name    string
		command []string
		wait    string
	}{
		{[]string{"n", "--", "sh", "-c", "x"}, "n", []string{"sh", "-c", "x"}, "forever"},
		{[]string{"n", "sh", "-c", "x"}, "n", []string{"sh", "-c", "x"}, "forever"},
		{[]string{"-wait", "1s", "n", "cmd", "-wait", "2s"}, "n", []string{"cmd", "-wait", "2s"}, "1s"},
		{[]string{"n", "-wait", "0", "--", "-cmd"}, "n", []string{"-cmd"}, "0s"},
		{[]string{"--", "n", "--", "cmd"}, "n", []string{"cmd"}, "forever"},
		{[]string{"-wait", "forever", "n", "cmd"}, "n", []string{"cmd"}, "forever"},
	} {
		e := &env{stdout: io.Discard, stderr: io.Discard}
		fs := newFlagSet(e, "run", "")
		w := waitFlag(-1)
		fs.Var(&w, "wait", "")
		name, command, err := parseRun(fs, c.args)
		if err != nil || name != c.name || !slices.Equal(command, c.command) || w.String() != c.wait {
			t.Errorf("parseRun(%q) = %q, %q, -wait %v, %v; want %q, %q, -wait %s", c.args, name, command, w.String(), err, c.name, c.command, c.wait)
		}
	}
}

func TestParseFlagsAroundArguments(t *testing.T) {
	for _, c := range []struct {
		args []string
		pos  []string
		v    bool
		s    string
	}{
		{[]string{"a"}, []string{"a"}, false, ""},
		{[]string{"-v", "a"}, []string{"a"}, true, ""},
		{[]string{"a", "-v"}, []string{"a"}, true, ""},
		{[]string{"a", "-s", "x", "b", "-v"}, []string{"a", "b"}, true, "x"},
		{[]string{"-s", "x", "--", "-v"}, []string{"-v"}, false, "x"},
		{[]string{"a", "--", "-v", "b"}, []string{"a", "-v", "b"}, false, ""},
		{[]string{"-s", "--", "a"}, []string{"a"}, false, "--"},
		{[]string{"-v", "--", "-s"}, []string{"-s"}, true, ""},
	} {
		e := &env{stdout: io.Discard, stderr: io.Discard}
		fs := newFlagSet(e, "test", "")
		v := fs.Bool("v", false, "")
		s := fs.String("s", "", "")
		pos, err := fs.parse(c.args)
		if err != nil || !slices.Equal(pos, c.pos) || *v != c.v || *s != c.s {
			t.Errorf("parse(%q) = %q, -v=%v, -s=%q, %v; want %q, %v, %q", c.args, pos, *v, *s, err, c.pos, c.v, c.s)
		}
	}
	e := &env{stdout: io.Discard, stderr: io.Discard}
	fs := newFlagSet(e, "test", "")
	if _, err := fs.parse([]string{"a", "-h"}); err != flag.ErrHelp {
		t.Errorf("parse(a -h): %v, want flag.ErrHelp", err)
	}
}

// pingOnlyServer answers PING with PONG, and nothing else: a server that
// passes the commands' first check and then stops answering.
func pingOnlyServer(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					if strings.Contains(string(buf[:n]), "PING") {
						c.Write([]byte("+PONG\r\n"))
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().String()
}

// TestServerStopsAnswering: a server that answers the first PING and
// nothing after it is an error within seconds too.
func TestServerStopsAnswering(t *testing.T) {
	addr := pingOnlyServer(t)
	for _, args := range [][]string{
		{"inspect", "-redis", addr, "orders:42"},
		{"inspect", "-redis", addr, "-kind", "fairlock", "-timeout", "500ms", "orders:42"},
		{"list", "-redis", addr, "-timeout", "500ms"},
		{"force-unlock", "-redis", addr, "-timeout", "500ms", "-yes", "x"},
		{"inspect", "-redis", addr, "-kind", "rwlock", "-timeout", "500ms", "x"},
		{"list", "-redis", addr, "-kind", "semaphore", "-timeout", "500ms"},
		{"force-unlock", "-redis", addr, "-kind", "semaphore", "-timeout", "500ms", "-yes", "x"},
		{"demo", "-redis", addr, "-timeout", "500ms"},
	} {
		failsWithin(t, args)
	}
}
