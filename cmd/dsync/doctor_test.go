package main

import (
	"context"
	"encoding/json"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dsyncgo/dsync/conformance/harness"
	"github.com/gomodule/redigo/redis"
)

// doctorJSON runs doctor -json on addr and returns its exit status and
// report, failing the test unless the output is a report with every check.
func doctorJSON(t *testing.T, addr string) (int, doctorReport) {
	t.Helper()
	code, stdout, stderr := runCmd(t, "", "doctor", "-redis", addr, "-json")
	var rep doctorReport
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("doctor -json: exit %d, printed %q: %v\nstderr:\n%s", code, stdout, err, stderr)
	}
	var names []string
	fails, warns := 0, 0
	for _, c := range rep.Checks {
		names = append(names, c.Name)
		switch c.Status {
		case statusFail:
			fails++
			if c.Fix == "" {
				t.Errorf("check %s failed without a fix: %+v", c.Name, c)
			}
		case statusWarn:
			warns++
		case statusOK:
			if c.Fix != "" {
				t.Errorf("check %s is ok with a fix: %+v", c.Name, c)
			}
		default:
			t.Errorf("check %s has status %q", c.Name, c.Status)
		}
	}
	want := []string{"version", "eviction", "persistence", "replication", "cluster", "scripting", "pubsub", "latency"}
	if !slices.Equal(names, want) || rep.Failures != fails || rep.Warnings != warns || rep.Server != addr {
		t.Errorf("doctor -json: checks %q (want %q), %d failures and %d warnings counted as %d and %d, server %q",
			names, want, fails, warns, rep.Failures, rep.Warnings, rep.Server)
	}
	return code, rep
}

// check returns the check called name of rep.
func (rep doctorReport) check(name string) doctorCheck {
	for _, c := range rep.Checks {
		if c.Name == name {
			return c
		}
	}
	return doctorCheck{}
}

// do runs a command on addr.
func do(t *testing.T, addr, cmd string, args ...any) any {
	t.Helper()
	c, err := redis.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	v, err := c.Do(cmd, args...)
	if err != nil {
		t.Fatalf("%s %v: %v", cmd, args, err)
	}
	return v
}

// TestDoctor runs doctor against a private redis-server with the tests'
// settings (persistence off), then with settings that break locks.
func TestDoctor(t *testing.T) {
	srv := harness.Standalone(t)
	addr := srv.Addr()

	code, rep := doctorJSON(t, addr)
	if code != exitOK || rep.Failures != 0 {
		t.Errorf("doctor on the defaults: exit %d, %+v", code, rep)
	}
	if c := rep.check("persistence"); c.Status != statusWarn || !strings.Contains(c.Detail, "persistence is off") ||
		!strings.Contains(c.Fix, "appendonly yes") {
		t.Errorf("persistence: %+v", c)
	}
	for _, name := range []string{"version", "eviction", "replication", "cluster", "scripting", "pubsub"} {
		if c := rep.check(name); c.Status != statusOK {
			t.Errorf("%s on the defaults: %+v", name, c)
		}
	}
	if keys := do(t, addr, "KEYS", "*"); len(keys.([]any)) != 0 {
		t.Errorf("doctor left keys behind: %q", keys)
	}

	code, stdout, _ := runCmd(t, "", "doctor", "-redis", addr)
	if code != exitOK || !strings.Contains(stdout, "WARN  persistence  persistence is off") || !strings.Contains(stdout, "0 failures, 1 warning") {
		t.Errorf("doctor: exit %d\n%s", code, stdout)
	}

	for _, policy := range []string{"allkeys-lru", "volatile-ttl"} {
		do(t, addr, "CONFIG", "SET", "maxmemory-policy", policy)
		code, rep = doctorJSON(t, addr)
		c := rep.check("eviction")
		if code != exitFailure || c.Status != statusFail || !strings.Contains(c.Detail, policy) ||
			!strings.Contains(c.Fix, "CONFIG SET maxmemory-policy noeviction") {
			t.Errorf("maxmemory-policy %s: exit %d, %+v", policy, code, c)
		}
	}
	code, stdout, _ = runCmd(t, "", "doctor", "-redis", addr)
	if code != exitFailure || !strings.HasPrefix(strings.SplitN(stdout, "\n", 4)[2], "FAIL  eviction") ||
		!strings.Contains(stdout, "fix: CONFIG SET maxmemory-policy noeviction") {
		t.Errorf("doctor: exit %d; failures come first, with their fix\n%s", code, stdout)
	}
	do(t, addr, "CONFIG", "SET", "maxmemory-policy", "noeviction")

	// The ACL refuses scripts and channels.
	do(t, addr, "ACL", "SETUSER", "default", "-evalsha", "resetchannels")
	code, rep = doctorJSON(t, addr)
	do(t, addr, "ACL", "SETUSER", "default", "+@all", "allchannels")
	if c := rep.check("scripting"); code != exitFailure || c.Status != statusFail || !strings.Contains(c.Detail, "NOPERM") ||
		!strings.Contains(c.Fix, "+@scripting") {
		t.Errorf("EVALSHA refused: exit %d, %+v", code, c)
	}
	if c := rep.check("pubsub"); c.Status != statusFail || !strings.Contains(c.Detail, "NOPERM") || !strings.Contains(c.Fix, "&dsync:*") {
		t.Errorf("channels refused: %+v", c)
	}

	do(t, addr, "CONFIG", "SET", "appendonly", "yes")
	code, rep = doctorJSON(t, addr)
	if c := rep.check("persistence"); code != exitOK || rep.Warnings != 0 || c.Status != statusOK {
		t.Errorf("with AOF: exit %d, %+v", code, rep)
	}
}

// startServer starts a private redis-server with args, stopped when t
// ends, or skips t as harness.Standalone does.
func startServer(t *testing.T, args ...string) *harness.Server {
	t.Helper()
	if !harness.Available() {
		if harness.RequireRedis() {
			t.Fatal("redis-server is not on PATH and DSYNC_REQUIRE_REDIS=1")
		}
		t.Skip("redis-server is not on PATH; set DSYNC_REQUIRE_REDIS=1 to fail instead")
	}
	s, err := harness.StartServer(context.Background(), args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// TestDoctorReplica: a replica fails; its primary warns that
// min-replicas-to-write is 0.
func TestDoctorReplica(t *testing.T) {
	primary := harness.Standalone(t)
	host, port, _ := net.SplitHostPort(primary.Addr())
	replica := startServer(t, "--replicaof", host, port)
	waitFor(t, "the replica to connect", func() bool {
		info, _ := redis.String(do(t, primary.Addr(), "INFO", "replication"), nil)
		return strings.Contains(info, "connected_slaves:1")
	})

	code, rep := doctorJSON(t, replica.Addr())
	if c := rep.check("replication"); code != exitFailure || c.Status != statusFail || !strings.Contains(c.Detail, "replica of "+primary.Addr()) {
		t.Errorf("the replica: exit %d, %+v", code, c)
	}
	code, rep = doctorJSON(t, primary.Addr())
	if c := rep.check("replication"); code != exitOK || c.Status != statusWarn || !strings.Contains(c.Fix, "min-replicas-to-write 1") {
		t.Errorf("the primary: exit %d, %+v", code, c)
	}
}

// doctorText runs doctor on addr and returns its exit status and report,
// failing the test unless each failure is followed by its fix.
func doctorText(t *testing.T, addr string) (int, string) {
	t.Helper()
	code, stdout, stderr := runCmd(t, "", "doctor", "-redis", addr)
	lines := strings.Split(stdout, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "FAIL") && (i+1 == len(lines) || !strings.Contains(lines[i+1], "fix: ")) {
			t.Errorf("doctor: a failure without its fix line:\n%s\nstderr:\n%s", stdout, stderr)
		}
	}
	return code, stdout
}

// TestDoctorCluster: a node in cluster mode that serves no hash slot
// (CLUSTERDOWN) fails the cluster and scripting checks, each with what to
// do; doctor says it saw one node.
func TestDoctorCluster(t *testing.T) {
	node := startServer(t, "--cluster-enabled", "yes")
	code, rep := doctorJSON(t, node.Addr())
	if c := rep.check("cluster"); c.Status != statusFail || !strings.Contains(c.Detail, "no hash slot") || !strings.Contains(c.Fix, "--cluster create") {
		t.Errorf("cluster: %+v", c)
	}
	if c := rep.check("scripting"); c.Status != statusFail || !strings.Contains(c.Detail, "CLUSTERDOWN") || !strings.Contains(c.Fix, "slot") {
		t.Errorf("scripting: %+v", c)
	}
	if code != exitFailure {
		t.Errorf("exit %d, want %d", code, exitFailure)
	}
	if code, out := doctorText(t, node.Addr()); code != exitFailure || !strings.Contains(out, "FAIL  scripting") {
		t.Errorf("doctor: exit %d\n%s", code, out)
	}
}

// TestDoctorOutOfMemory: a noeviction server at its maxmemory refuses the
// scripting probe with OOM; doctor says to raise maxmemory or free memory.
func TestDoctorOutOfMemory(t *testing.T) {
	srv := startServer(t, "--maxmemory-policy", "noeviction")
	addr := srv.Addr()
	info, _ := redis.String(do(t, addr, "INFO", "memory"), nil)
	used, err := strconv.Atoi(parseInfo(info)["used_memory"])
	if err != nil {
		t.Fatalf("used_memory in %q: %v", info, err)
	}
	do(t, addr, "CONFIG", "SET", "maxmemory", used+1<<20)
	c, err := redis.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	value := strings.Repeat("x", 64<<10)
	full := false
	for i := 0; i < 200 && !full; i++ { // 12.5 MiB at most
		_, err := c.Do("SET", "fill:"+strconv.Itoa(i), value)
		full = err != nil && strings.HasPrefix(err.Error(), "OOM")
		if err != nil && !full {
			t.Fatal(err)
		}
	}
	if !full {
		t.Fatal("the server did not refuse a write with OOM")
	}

	code, rep := doctorJSON(t, addr)
	if c := rep.check("scripting"); c.Status != statusFail || !strings.Contains(c.Detail, "OOM") || !strings.Contains(c.Fix, "maxmemory") {
		t.Errorf("scripting: %+v", c)
	}
	if code != exitFailure {
		t.Errorf("exit %d, want %d", code, exitFailure)
	}
	if code, out := doctorText(t, addr); code != exitFailure || !strings.Contains(out, "FAIL  scripting") {
		t.Errorf("doctor: exit %d\n%s", code, out)
	}
}
