//go:build unix

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
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dsyncgo/dsync/conformance/harness"
	"github.com/dsyncgo/dsync/internal/keys"
)

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
	var out syncBuffer // a directive refused goes here, not to the log
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	setParentDeathSignal(cmd.SysProcAttr) // a test binary that dies takes it along
	if err := cmd.Start(); err != nil {
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
			log = append(log, out.String()...)
			if strings.Contains(string(log), "tls-port") && !harness.RequireRedis() {
				t.Skipf("redis-server was built without TLS:\n%s", log) // it refuses the directive
			}
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
