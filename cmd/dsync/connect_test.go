package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dsyncgo/dsync/conformance/harness"
	"github.com/dsyncgo/dsync/internal/keys"
)

// TestConnectParse: what -redis, -cluster and -sentinel take, and the
// usage errors of what they do not, none of which quotes a password.
func TestConnectParse(t *testing.T) {
	const secret = "s3cr3t"
	for _, c := range []struct {
		parse func(s, source string) (target, error)
		in    string
		want  target // zero: a usage error
	}{
		{parseRedis, "db.example:6380", target{kind: serverStandalone, addrs: []string{"db.example:6380"}}},
		{parseRedis, "localhost", target{kind: serverStandalone, addrs: []string{"localhost:6379"}}},
		{parseRedis, "[::1]:7000", target{kind: serverStandalone, addrs: []string{"[::1]:7000"}}},
		{parseRedis, "redis://h", target{kind: serverStandalone, addrs: []string{"h:6379"}}},
		{parseRedis, "redis://app:" + secret + "@h:1/2", target{kind: serverStandalone, addrs: []string{"h:1"}, user: "app", password: secret, db: 2}},
		{parseRedis, "REDISS://:p%40ss@h:6380/", target{kind: serverStandalone, addrs: []string{"h:6380"}, password: "p@ss", tls: true}},
		{parseRedis, "redis://app@h:1", target{}},
		{parseRedis, "redis://app:" + secret + "@h:1/x", target{}},
		{parseRedis, "redis://app:" + secret + "@h:1/-1", target{}},
		{parseRedis, "redis://app:s3 cr3t@h:1", target{}},
		{parseRedis, "redis://app:" + secret + "@h:1?db=2", target{}},
		{parseRedis, "redis://app:" + secret + "@h:99999", target{}},
		{parseRedis, "http://app:" + secret + "@h:1", target{}},
		{parseRedis, "h:port", target{}},
		{parseRedis, ":6379", target{}},
		{parseCluster, "a:1,b:2", target{kind: serverCluster, addrs: []string{"a:1", "b:2"}}},
		{parseCluster, "rediss://app:" + secret + "@a:1,b:2", target{kind: serverCluster, addrs: []string{"a:1", "b:2"}, user: "app", password: secret, tls: true}},
		{parseCluster, "a:1,b:2/1", target{}},
		{parseCluster, "app:" + secret + "@a:1", target{}},
		{parseCluster, "a:1,", target{}},
		{parseSentinel, "mymaster@a:26379,b:26379/3", target{kind: serverSentinel, master: "mymaster", addrs: []string{"a:26379", "b:26379"}, db: 3}},
		{parseSentinel, "redis://:" + secret + "@m@a:1", target{kind: serverSentinel, master: "m", addrs: []string{"a:1"}, password: secret}},
		{parseSentinel, "a:26379", target{}},
		{parseSentinel, "@a:26379", target{}},
		{parseSentinel, "rediss://app:" + secret + "@a:1", target{}},
	} {
		got, err := c.parse(c.in, "-x")
		got.source = ""
		if c.want.kind == "" {
			var ue usageError
			if !errors.As(err, &ue) {
				t.Errorf("%q: %+v, %v; want a usage error", c.in, got, err)
			} else if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "s3 cr3t") {
				t.Errorf("%q: the error quotes the password: %v", c.in, err)
			}
			continue
		}
		if err != nil || got.kind != c.want.kind || !slices.Equal(got.addrs, c.want.addrs) || got.master != c.want.master ||
			got.user != c.want.user || got.password != c.want.password || got.db != c.want.db || got.tls != c.want.tls {
			t.Errorf("%q: %+v, %v; want %+v", c.in, got, err, c.want)
		}
		if strings.Contains(got.String(), secret) || strings.Contains(got.addr(), secret) {
			t.Errorf("%q: %q, %q name the password", c.in, got, got.addr())
		}
	}
	for in, want := range map[string]string{
		"redis://app:" + secret + "@h:1":        "redis://app:xxxxx@h:1",
		"rediss://:" + secret + "@m@a:1,b:2":    "rediss://:xxxxx@m@a:1,b:2",
		"redis://app:" + secret + "@h:1/x?y=@z": "redis://app:xxxxx@h:1/x?y=@z",
		"h:1":                                   "h:1",
	} {
		if got := redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestConnectSettingChosen: a flag names the server, else the
// environment ($DSYNC_REDIS, $DSYNC_CLUSTER or $DSYNC_SENTINEL, else
// $REDIS_URL), else the command's default; two at once are a usage error.
func TestConnectSettingChosen(t *testing.T) {
	for _, v := range []string{envRedis, envCluster, envSentinel, envRedisURL} {
		t.Setenv(v, "")
	}
	pick := func(args ...string) (target, error) {
		fs := newFlagSet(&env{stdout: &syncBuffer{}, stderr: &syncBuffer{}}, "test", "")
		f := connFlags{env: true, fallback: "localhost:6379"}
		f.register(fs, "")
		if _, err := fs.parse(args); err != nil {
			return target{}, err
		}
		return f.target()
	}
	check := func(what string, want string, args ...string) {
		t.Helper()
		got, err := pick(args...)
		switch {
		case want == "" && err == nil:
			t.Errorf("%s: %v, want a usage error", what, got)
		case want != "" && (err != nil || got.String() != want):
			t.Errorf("%s: %v, %v; want %s", what, got, err, want)
		}
	}
	check("nothing", "redis at localhost:6379")
	t.Setenv(envRedisURL, "redis://url:1")
	check("$REDIS_URL", "redis at url:1")
	t.Setenv(envRedis, "rediss://:pw@env:1")
	check("$DSYNC_REDIS before $REDIS_URL", "redis at env:1")
	check("-redis before $DSYNC_REDIS", "redis at flag:1", "-redis", "flag:1")
	check("-cluster before $DSYNC_REDIS", "cluster at a:1,b:2", "-cluster", "a:1,b:2")
	check("-tls-ca with TLS", "redis at env:1", "-tls-ca", "ca.pem")
	check("-tls-ca without TLS", "", "-tls-ca", "ca.pem", "-redis", "flag:1")
	check("-tls-ca and -tls-insecure", "", "-tls-ca", "ca.pem", "-tls-insecure")
	check("-redis and -sentinel", "", "-redis", "flag:1", "-sentinel", "m@a:1")
	check("-redis empty", "", "-redis", "")
	t.Setenv(envSentinel, "m@s:1")
	check("$DSYNC_REDIS and $DSYNC_SENTINEL", "")
	t.Setenv(envRedis, "")
	check("$DSYNC_SENTINEL", `primary "m" of the Sentinels at s:1`)
}

// tlsFiles writes a CA certificate and a server certificate for
// 127.0.0.1 and localhost, signed by it, with its key, to dir.
func tlsFiles(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	now := time.Now()
	caKey := newKey()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "dsync test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	srvKey := newKey()
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", srvDER), write("server.key", "EC PRIVATE KEY", keyDER)
}

// tlsServer starts a redis-server that serves TLS only, with a
// certificate for 127.0.0.1 signed by the CA in the returned file, and
// the user app (password apppass) beside the default user, whose password
// is defpass. It is stopped when t ends.
func tlsServer(t *testing.T) (addr, ca string) {
	t.Helper()
	if !harness.Available() {
		if harness.RequireRedis() {
			t.Fatal("redis-server is not on PATH and DSYNC_REQUIRE_REDIS=1")
		}
		t.Skip("redis-server is not on PATH; set DSYNC_REQUIRE_REDIS=1 to fail instead")
	}
	dir := t.TempDir()
	ca, cert, key := tlsFiles(t, dir)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = l.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	l.Close()
	cmd := exec.Command("redis-server", "--port", "0", "--tls-port", port, "--bind", "127.0.0.1",
		"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", ca, "--tls-auth-clients", "no",
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"),
		"--requirepass", "defpass")
	if err := cmd.Start(); err != nil {
		if strings.Contains(err.Error(), "tls") {
			t.Skipf("redis-server without TLS: %v", err)
		}
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	pool := x509.NewCertPool()
	pemCA, _ := os.ReadFile(ca)
	pool.AppendCertsFromPEM(pemCA)
	admin := redis.NewClient(&redis.Options{Addr: addr, Password: "defpass", Protocol: 2, DisableIdentity: true,
		TLSConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, DialerRetries: 1, MaxRetries: -1})
	defer admin.Close()
	// The server answers once it listens; nothing tells when that is.
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := admin.Do(ctx, "ACL", "SETUSER", "app", "on", ">apppass", "~*", "&*", "+@all").Err()
		cancel()
		if err == nil {
			break
		}
		select {
		case werr := <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			t.Fatalf("redis-server exited (%v) before it answered: %v\n%s", werr, err, log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the TLS server did not answer within 10s: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return addr, ca
}

// TestConnectTLS: doctor reaches a TLS server as an ACL user, from -redis
// and from $DSYNC_REDIS; without the CA, or with the wrong scheme, the
// error says to check TLS, and never shows the password.
func TestConnectTLS(t *testing.T) {
	addr, ca := tlsServer(t)
	url := "rediss://app:apppass@" + addr + "/0"
	code, stdout, stderr := runCmd(t, "", "doctor", "-redis", url, "-tls-ca", ca)
	if code != exitOK || !strings.Contains(stdout, "redis at "+addr) || !strings.Contains(stdout, "OK    scripting") {
		t.Errorf("doctor -redis rediss://app:...: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	noPassword(t, "doctor -redis rediss://...", stdout+stderr, "apppass")

	t.Setenv(envRedis, url)
	code, stdout, stderr = runCmd(t, "", "doctor", "-json", "-tls-ca", ca)
	if code != exitOK || !strings.Contains(stdout, `"server": "`+addr+`"`) {
		t.Errorf("doctor with $DSYNC_REDIS: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	noPassword(t, "doctor with $DSYNC_REDIS", stdout+stderr, "apppass")
	if code, stdout, stderr := runCmd(t, "", "inspect", "-tls-ca", ca, "x"); code != exitOK || !strings.Contains(stdout, `mutex "x": free`) {
		t.Errorf("inspect with $DSYNC_REDIS: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}

	code, _, stderr = runCmd(t, "", "doctor", "-tls-insecure")
	if code != exitOK || !strings.Contains(stderr, "warning: -tls-insecure") {
		t.Errorf("doctor -tls-insecure: exit %d, want 0 and a warning\nstderr:\n%s", code, stderr)
	}

	// The system's CAs do not know the test's.
	code, stdout, stderr = runCmd(t, "", "inspect", "x")
	if code != exitFailure || !strings.Contains(stderr, "TLS with redis at "+addr+" failed") || !strings.Contains(stderr, "check -tls-ca") {
		t.Errorf("inspect without -tls-ca: exit %d, want %d and a TLS error\nstdout:\n%s\nstderr:\n%s", code, exitFailure, stdout, stderr)
	}
	noPassword(t, "inspect without -tls-ca", stdout+stderr, "apppass")

	// redis:// to a port that serves TLS.
	code, stdout, stderr = runCmd(t, "", "inspect", "-redis", "redis://app:apppass@"+addr, "x")
	if code != exitFailure || !strings.Contains(stderr, "TLS failed: redis at "+addr+" answers in TLS only: check the scheme (rediss://") {
		t.Errorf("inspect redis:// at a TLS port: exit %d, want %d and a word on rediss://\nstdout:\n%s\nstderr:\n%s", code, exitFailure, stdout, stderr)
	}
	noPassword(t, "inspect redis:// at a TLS port", stdout+stderr, "apppass")
}

// noPassword fails t if out shows the password.
func noPassword(t *testing.T, what, out, password string) {
	t.Helper()
	if strings.Contains(out, password) {
		t.Errorf("%s shows the password:\n%s", what, out)
	}
}

// TestConnectErrors: a wrong password, a password missing, TLS that
// fails and a server that is not there are errors of their own, each
// naming what to check, none showing the password.
func TestConnectErrors(t *testing.T) {
	srv := startServer(t)
	do(t, srv.Addr(), "ACL", "SETUSER", "app", "on", ">apppass", "~*", "&*", "+@all")
	do(t, srv.Addr(), "CONFIG", "SET", "requirepass", "defpass")
	closed := closedAddr(t)
	for _, c := range []struct {
		what, redis string
		err         error
		want        string
	}{
		{"a wrong password", "redis://app:wrongpass@" + srv.Addr(), errCredentials, "refused the user and password of -redis (WRONGPASS"},
		{"a wrong default password", "redis://:wrongpass@" + srv.Addr(), errCredentials, "check both"},
		{"no password", srv.Addr(), errCredentials, "wants a password"},
		{"TLS to a server without", "rediss://app:wrongpass@" + srv.Addr(), errTLS, "does not answer in TLS but in plain text: check the scheme (redis://"},
		{"no server", "redis://app:wrongpass@" + closed, errNoServer, "cannot connect to redis at " + closed},
	} {
		fs := newFlagSet(&env{}, "test", "")
		f := connFlags{}
		f.register(fs, "")
		if _, err := fs.parse([]string{"-redis", c.redis, "-timeout", "1s"}); err != nil {
			t.Fatal(err)
		}
		var stderr syncBuffer
		_, err := openServer(context.Background(), &env{stderr: &stderr}, &f)
		if !errors.Is(err, c.err) || !strings.Contains(fmtErr(err), c.want) || !strings.Contains(fmtErr(err), "check") {
			t.Errorf("%s: %v, want %v with %q and what to check", c.what, err, c.err, c.want)
		}
		for _, other := range []error{errCredentials, errTLS, errNoServer} {
			if other != c.err && errors.Is(err, other) {
				t.Errorf("%s: %v is %v too", c.what, err, other)
			}
		}
		noPassword(t, c.what, fmtErr(err)+stderr.String(), "wrongpass")
		t.Logf("%s: %v", c.what, err)

		// The same through the command: status 1, the message on stderr.
		code, stdout, out := runCmd(t, "", "inspect", "-redis", c.redis, "-timeout", "1s", "x")
		if code != exitFailure || !strings.Contains(out, c.want) {
			t.Errorf("inspect with %s: exit %d\nstdout:\n%s\nstderr:\n%s", c.what, code, stdout, out)
		}
		noPassword(t, c.what, stdout+out, "wrongpass")
	}

	// The right ones work, from the command line and from the
	// environment, the user's and the default user's.
	for _, url := range []string{"redis://app:apppass@" + srv.Addr() + "/0", "redis://:defpass@" + srv.Addr()} {
		if code, stdout, stderr := runCmd(t, "", "list", "-redis", url); code != exitOK {
			t.Errorf("list: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		t.Setenv(envRedis, url)
		if code, stdout, stderr := runCmd(t, "", "force-unlock", "-yes", "x"); code != exitOK {
			t.Errorf("force-unlock with $DSYNC_REDIS: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
	}
}

func fmtErr(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestConnectDatabase: a URL's database number is the one the locks are
// in.
func TestConnectDatabase(t *testing.T) {
	srv := startServer(t)
	code, stdout, stderr := runCmd(t, "", "demo", "-redis", "redis://"+srv.Addr()+"/3", "-workers", "2", "-rounds", "2")
	if code != exitOK {
		t.Fatalf("demo: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	// The demo's keys were in database 3, and are gone; database 0 never
	// had any.
	info, _ := do(t, srv.Addr(), "INFO", "keyspace").([]byte)
	if strings.Contains(string(info), "db0:") || !strings.Contains(string(info), "db3:") && !strings.Contains(stdout, "none is left") {
		t.Errorf("INFO keyspace after the demo on database 3:\n%s\ndemo:\n%s", info, stdout)
	}
	if code, _, stderr := runCmd(t, "", "bench", "-redis", "redis://:pw@"+srv.Addr()); code != exitUsage || strings.Contains(stderr, "pw@") {
		t.Errorf("bench with a password: exit %d, want %d\nstderr:\n%s", code, exitUsage, stderr)
	}
}

// TestConnectCluster: run, inspect, list, force-unlock and doctor reach a
// Redis Cluster through -cluster or $DSYNC_CLUSTER, and find locks on
// every master.
func TestConnectCluster(t *testing.T) {
	cl := harness.NewCluster(t, 3)
	seeds := strings.Join(cl.Addrs(), ",")
	p := startDsync(t, []string{envCluster + "=" + seeds}, "run", "cluster:job", "--", "sh", "-c", `echo "token $DSYNC_TOKEN"`)
	if tok, _ := p.expect(t, "token "); tok == "" || tok == "0" {
		t.Errorf("DSYNC_TOKEN %q", tok)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("run on the cluster: exit %d\nstderr:\n%s", code, &p.stderr)
	}

	// Two locks on each master (the harness gives master i the i-th
	// third of the slots), held by processes of their own.
	var names []string
	perMaster := map[int]int{}
	for i := 0; len(names) < 6 && i < 1000; i++ {
		name := "job:" + strconv.Itoa(i)
		key, err := keys.Base(keys.DefaultPrefix, kindMutex, name)
		if err != nil {
			t.Fatal(err)
		}
		if m := int(keys.Slot(key)) * 3 / 16384; perMaster[m] < 2 {
			perMaster[m]++
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var holders []*dsyncProc
	for _, name := range names {
		p := startDsync(t, []string{envCluster + "=" + seeds}, "run", "-lease", "1500ms", name, "--", "sh", "-c", `echo "held $DSYNC_NAME"; exec sleep 60`)
		p.expect(t, "held ")
		holders = append(holders, p)
	}
	code, stdout, stderr := runCmd(t, "", "list", "-cluster", seeds, "-json")
	var states []lockState
	if err := json.Unmarshal([]byte(stdout), &states); err != nil {
		t.Fatalf("list -cluster -json printed %q: %v", stdout, err)
	}
	var listed []string
	for _, s := range states {
		listed = append(listed, s.Name)
	}
	slices.Sort(listed)
	if code != exitOK || !slices.Equal(listed, names) {
		t.Errorf("list -cluster: exit %d, %q, want %q\nstderr:\n%s", code, listed, names, stderr)
	}
	code, stdout, stderr = runCmd(t, "", "inspect", "-cluster", seeds, "-json", names[1])
	if s := decodeLock(t, stdout); code != exitOK || !s.Locked {
		t.Errorf("inspect -cluster: exit %d, %+v\nstderr:\n%s", code, s, stderr)
	}
	for i, name := range names {
		if code, stdout, stderr := runCmd(t, "", "force-unlock", "-cluster", seeds, "-yes", name); code != exitOK {
			t.Errorf("force-unlock -cluster %s: exit %d\nstdout:\n%s\nstderr:\n%s", name, code, stdout, stderr)
		}
		if code := holders[i].wait(t); code != exitLost {
			t.Errorf("run %s after force-unlock: exit %d, want %d\nstderr:\n%s", name, code, exitLost, &holders[i].stderr)
		}
	}

	code, stdout, stderr = runCmd(t, "", "doctor", "-cluster", seeds, "-json")
	var rep doctorReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("doctor -cluster: exit %d, %v\n%s\nstderr:\n%s", code, err, stdout, stderr)
	}
	nodes := map[string]int{}
	for _, c := range rep.Checks {
		nodes[c.Node]++
		if (c.Name == "cluster" || c.Name == "scripting" || c.Name == "pubsub") && c.Status != statusOK {
			t.Errorf("doctor -cluster: %+v", c)
		}
	}
	if len(nodes) != 3 || rep.Server != seeds {
		t.Errorf("doctor -cluster checked %v on %q, want the 3 masters of %s", nodes, rep.Server, seeds)
	}
}

// TestConnectSentinel: the commands reach the primary a Sentinel names,
// through -sentinel or $DSYNC_SENTINEL.
func TestConnectSentinel(t *testing.T) {
	s := harness.NewSentinel(t)
	setting := harness.MasterName + "@" + strings.Join(s.SentinelAddrs(), ",")
	code, stdout, stderr := runCmd(t, "", "doctor", "-sentinel", setting)
	if code != exitOK || !strings.Contains(stdout, `primary "`+harness.MasterName+`"`) || !strings.Contains(stdout, "OK    scripting") {
		t.Errorf("doctor -sentinel: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	t.Setenv(envSentinel, setting)
	p := startDsync(t, nil, "run", "sentinel:job", "--", "sh", "-c", `echo "token $DSYNC_TOKEN"`)
	p.expect(t, "token ")
	if code := p.wait(t); code != 0 {
		t.Errorf("run with $DSYNC_SENTINEL: exit %d\nstderr:\n%s", code, &p.stderr)
	}
	if code, stdout, stderr := runCmd(t, "", "inspect", "-json", "sentinel:job"); code != exitOK || decodeLock(t, stdout).Token == 0 {
		t.Errorf("inspect with $DSYNC_SENTINEL: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}
