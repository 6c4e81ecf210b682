package main

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend/goredis"
	"github.com/dsyncgo/dsync/mutex"
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
// in, and the demo's keys too.
func TestConnectDatabase(t *testing.T) {
	srv := startServer(t)
	ctx := dsync.WithOwner(context.Background())
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr(), DB: 3, Protocol: 2})
	b := goredis.New(rc)
	defer func() {
		b.Close()
		rc.Close()
	}()
	m := mutex.New(b, "db:job")
	if err := m.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.UnlockContext(ctx)
	for url, locked := range map[string]bool{"redis://" + srv.Addr() + "/3": true, "redis://" + srv.Addr(): false, srv.Addr(): false} {
		code, stdout, stderr := runCmd(t, "", "inspect", "-redis", url, "-json", "db:job")
		if s := decodeLock(t, stdout); code != exitOK || s.Locked != locked {
			t.Errorf("inspect -redis %s: exit %d, locked %v, want %v\nstderr:\n%s", url, code, s.Locked, locked, stderr)
		}
	}

	code, stdout, stderr := runCmd(t, "", "demo", "-redis", "redis://"+srv.Addr()+"/3", "-workers", "2", "-rounds", "2")
	if code != exitOK || !strings.Contains(stdout, "none is left") {
		t.Errorf("demo on database 3: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if code, _, stderr := runCmd(t, "", "bench", "-redis", "redis://:pw@"+srv.Addr()); code != exitUsage || strings.Contains(stderr, "pw@") {
		t.Errorf("bench with a password: exit %d, want %d\nstderr:\n%s", code, exitUsage, stderr)
	}
}
