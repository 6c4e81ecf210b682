package main

// How every command reaches its server: the connection flags and the
// environment, the three kinds of server (one server, a Redis Cluster, a
// primary found through Sentinel), URLs with credentials and TLS, and the
// errors that say what to check when the server cannot be reached.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/dsyncgo/dsync/backend/goredis"
	"github.com/dsyncgo/dsync/observe"
)

// The environment variables that name the server of the commands that
// need a shared one (run, doctor, inspect, list, force-unlock) when no
// flag does: one of the first three, else $REDIS_URL, as -redis.
const (
	envRedis    = "DSYNC_REDIS"
	envCluster  = "DSYNC_CLUSTER"
	envSentinel = "DSYNC_SENTINEL"
	envRedisURL = "REDIS_URL"
)

// connUsage is the part of a command's usage on the server it talks to;
// env tells whether the command reads the environment.
func connUsage(env bool) string {
	u := `The server: -redis takes host:port or a URL,
redis://[user:password@]host:port[/db] (rediss:// for TLS, verified
against the system's CAs or -tls-ca's; -tls-insecure skips that, with a
warning). -cluster takes seed nodes of a Redis Cluster, -sentinel the
name of a primary and the Sentinels that know it (asked without
credentials); either may start with redis[s]://[user:password@].`
	if env {
		u += ` Without
these flags the server is $DSYNC_REDIS (else $REDIS_URL), $DSYNC_CLUSTER
or $DSYNC_SENTINEL, in the forms of -redis, -cluster and -sentinel: a
password there stays off the command line, where ps shows it to every
user of the machine.`
	}
	return u
}

// The kinds of server.
const (
	serverStandalone = "redis"
	serverCluster    = "cluster"
	serverSentinel   = "sentinel"
)

// A target is a server setting, parsed: where to connect and how.
type target struct {
	kind     string   // serverStandalone, serverCluster or serverSentinel
	addrs    []string // host:port of the server, of the seed nodes or of the Sentinels
	master   string   // with serverSentinel: the primary's name
	user     string
	password string
	db       int
	tls      bool
	source   string // where it was given: "-redis", "$DSYNC_REDIS", ...
}

// String names the server in messages: never with its password.
func (t target) String() string {
	switch t.kind {
	case serverCluster:
		return "cluster at " + strings.Join(t.addrs, ",")
	case serverSentinel:
		return fmt.Sprintf("primary %q of the Sentinels at %s", t.master, strings.Join(t.addrs, ","))
	}
	return "redis at " + t.addrs[0]
}

// addr is the server as doctor reports it: host:port, the seed nodes, or
// name@ the Sentinels; without credentials.
func (t target) addr() string {
	a := strings.Join(t.addrs, ",")
	if t.kind == serverSentinel {
		return t.master + "@" + a
	}
	return a
}

// optFlag is a string flag that knows whether it was given.
type optFlag struct {
	v   string
	set bool
}

func (f *optFlag) String() string { return f.v }

// Set keeps s as is: a URL is checked after parsing, where an error can
// leave its password out (flag's own message would quote it).
func (f *optFlag) Set(s string) error {
	f.v, f.set = s, true
	return nil
}

// connFlags are the connection flags of a command.
type connFlags struct {
	redis, cluster, sentinel optFlag
	tlsCA                    string
	tlsInsecure              bool
	timeout                  time.Duration

	// env: without a flag, the server is taken from the environment, and
	// then is fallback; a command with neither requires a flag, unless
	// optional (demo and bench have a server of their own).
	env      bool
	fallback string
	optional bool
}

// register adds the connection flags to fs; redisHelp is -redis's help.
func (f *connFlags) register(fs *flagSet, redisHelp string) {
	fs.Var(&f.redis, "redis", redisHelp)
	fs.Var(&f.cluster, "cluster", "seed `nodes` of a Redis Cluster: host:port,... (after redis[s]://[user:password@] for credentials and TLS)")
	fs.Var(&f.sentinel, "sentinel", "the primary called name, found through these Sentinels: `name@host:port,...` (after redis[s]://[user:password@] for the primary's credentials, and TLS)")
	fs.StringVar(&f.tlsCA, "tls-ca", "", "with TLS, verify the server's certificate against the CA certificates in this PEM `file` instead of the system's")
	fs.BoolVar(&f.tlsInsecure, "tls-insecure", false, "with TLS, do not verify the server's certificate (a warning says so)")
	fs.DurationVar(&f.timeout, "timeout", defaultTimeout, "give up on a server that does not connect or answer a call within this `duration`")
}

// envHelp is the help of -redis for a command that reads the environment.
func envHelp(fallback string) string {
	h := "`URL` or host:port of the Redis server: redis://[user:password@]host:port[/db], rediss:// for TLS (default $DSYNC_REDIS, else $REDIS_URL"
	if fallback != "" {
		h += ", else " + fallback
	}
	return h + ")"
}

// target returns the server the flags, or else the environment, name. It
// returns a usageError for a bad setting, and the zero target (kind "")
// when none is given to an optional command.
func (f *connFlags) target() (target, error) {
	if f.timeout <= 0 {
		return target{}, usagef("-timeout must be positive")
	}
	t, err := f.pick()
	if err != nil || t.kind == "" {
		if err == nil && (f.tlsCA != "" || f.tlsInsecure) {
			err = usagef("-tls-ca and -tls-insecure need a server with TLS (rediss://)")
		}
		return t, err
	}
	switch {
	case f.tlsCA != "" && f.tlsInsecure:
		return target{}, usagef("give -tls-ca or -tls-insecure, not both")
	case !t.tls && (f.tlsCA != "" || f.tlsInsecure):
		return target{}, usagef("-tls-ca and -tls-insecure need a server with TLS: rediss://... in %s", t.source)
	}
	return t, nil
}

// pick parses the one server setting given: a flag, else a variable of
// the environment, else the fallback.
func (f *connFlags) pick() (target, error) {
	type setting struct {
		name, value string
		parse       func(s, source string) (target, error)
	}
	var given []setting
	for _, s := range []struct {
		name string
		f    *optFlag
		p    func(s, source string) (target, error)
	}{{"-redis", &f.redis, parseRedis}, {"-cluster", &f.cluster, parseCluster}, {"-sentinel", &f.sentinel, parseSentinel}} {
		if s.f.set {
			given = append(given, setting{s.name, s.f.v, s.p})
		}
	}
	if len(given) == 0 && f.env {
		for _, s := range []setting{{"$" + envRedis, os.Getenv(envRedis), parseRedis},
			{"$" + envCluster, os.Getenv(envCluster), parseCluster}, {"$" + envSentinel, os.Getenv(envSentinel), parseSentinel}} {
			if s.value != "" {
				given = append(given, s)
			}
		}
		if len(given) == 0 {
			if u := os.Getenv(envRedisURL); u != "" {
				given = append(given, setting{"$" + envRedisURL, u, parseRedis})
			}
		}
	}
	switch {
	case len(given) > 1:
		var names []string
		for _, s := range given {
			names = append(names, s.name)
		}
		return target{}, usagef("%s name the server each: give one", strings.Join(names, " and "))
	case len(given) == 1:
		s := given[0]
		if s.value == "" {
			return target{}, usagef("%s must not be empty", s.name)
		}
		return s.parse(s.value, s.name)
	case f.fallback != "":
		return parseRedis(f.fallback, "the default")
	case f.optional:
		return target{}, nil
	}
	if f.env {
		return target{}, usagef("-redis, -cluster or -sentinel is required (or $%s, $%s, $%s)", envRedis, envCluster, envSentinel)
	}
	return target{}, usagef("-redis, -cluster or -sentinel is required")
}

// parseRedis parses -redis: host:port (or host, port 6379), or
// redis[s]://[user:password@]host[:port][/db].
func parseRedis(s, source string) (target, error) {
	t := target{kind: serverStandalone, source: source}
	tlsOn, rest, err := cutScheme(s, source)
	if err != nil {
		return target{}, err
	}
	if rest == s { // no scheme: host:port
		a, err := hostPort(s, source)
		if err != nil {
			return target{}, err
		}
		t.addrs = []string{a}
		return t, nil
	}
	t.tls = tlsOn
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error quotes the URL, password and all
		}
		return target{}, usagef("%s: %s is not a URL redis[s]://[user:password@]host:port[/db]: %v", source, redact(s), err)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return target{}, usagef("%s: %s: want redis[s]://[user:password@]host:port[/db], with no ?query or #fragment", source, redact(s))
	}
	if t.user, t.password, err = credentials(u.User, source); err != nil {
		return target{}, err
	}
	a, err := hostPort(u.Host, source)
	if err != nil {
		return target{}, err
	}
	t.addrs = []string{a}
	if t.db, err = dbNumber(u.Path, source); err != nil {
		return target{}, err
	}
	return t, nil
}

// parseCluster parses -cluster: [redis[s]://[user:password@]]host:port,...
func parseCluster(s, source string) (target, error) {
	t, hosts, err := parseList(s, source, serverCluster)
	if err != nil {
		return target{}, err
	}
	if t.db != 0 {
		return target{}, usagef("%s: a cluster has database 0 only", source)
	}
	t.addrs = hosts
	return t, nil
}

// parseSentinel parses -sentinel:
// [redis[s]://[user:password@]]name@host:port,...[/db].
func parseSentinel(s, source string) (target, error) {
	t, hosts, err := parseList(s, source, serverSentinel)
	if err != nil {
		return target{}, err
	}
	t.addrs = hosts
	return t, nil
}

// parseList parses the settings of a cluster or Sentinel: a scheme and
// credentials if any, with a Sentinel the primary's name, then a list of
// host:port, then with a Sentinel a database number if any.
func parseList(s, source, kind string) (target, []string, error) {
	t := target{kind: kind, source: source}
	tlsOn, rest, err := cutScheme(s, source)
	if err != nil {
		return target{}, nil, err
	}
	scheme := rest != s
	t.tls = tlsOn
	want := "host:port,..."
	if kind == serverSentinel {
		want = "name@host:port,...[/db]"
	}
	bad := func(why string) (target, []string, error) {
		return target{}, nil, usagef("%s: %s: want [redis[s]://[user:password@]]%s: %s", source, redact(s), want, why)
	}
	// Credentials, percent-encoded as in a URL, cannot hold a raw "@":
	// the first one ends them, and with a Sentinel the next ends the
	// primary's name.
	parts := strings.Split(rest, "@")
	need := 1
	if kind == serverSentinel {
		need = 2
	}
	switch {
	case len(parts) == need+1 && scheme:
		info := parts[0]
		user, pass, ok := strings.Cut(info, ":")
		var ui *url.Userinfo
		if ok {
			u, err1 := url.PathUnescape(user)
			p, err2 := url.PathUnescape(pass)
			if err1 != nil || err2 != nil {
				return bad("the user or password is not percent-encoded right")
			}
			ui = url.UserPassword(u, p)
		} else {
			u, err := url.PathUnescape(user)
			if err != nil {
				return bad("the user is not percent-encoded right")
			}
			ui = url.User(u)
		}
		if t.user, t.password, err = credentials(ui, source); err != nil {
			return target{}, nil, err
		}
		parts = parts[1:]
	case len(parts) != need:
		return bad("a user and password need redis:// or rediss:// before them")
	}
	list := parts[len(parts)-1]
	if kind == serverSentinel {
		switch t.master = parts[0]; {
		case t.master == "":
			return bad("no primary name")
		case strings.Contains(t.master, ":"):
			// Credentials, most likely, without the name after them.
			return bad("the primary's name comes after the credentials: user:password@name@host:port")
		}
	}
	if i := strings.IndexByte(list, '/'); i >= 0 {
		if t.db, err = dbNumber(list[i:], source); err != nil {
			return target{}, nil, err
		}
		list = list[:i]
	}
	var hosts []string
	for h := range strings.SplitSeq(list, ",") {
		a, err := hostPort(h, source)
		if err != nil {
			return target{}, nil, err
		}
		hosts = append(hosts, a)
	}
	return t, hosts, nil
}

// cutScheme cuts redis:// or rediss:// off s, and reports which. s comes
// back unchanged when it has no scheme.
func cutScheme(s, source string) (tlsOn bool, rest string, err error) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return false, s, nil
	}
	switch strings.ToLower(scheme) {
	case "redis":
		return false, rest, nil
	case "rediss":
		return true, rest, nil
	}
	return false, "", usagef("%s: unknown scheme %q: want redis:// or rediss:// (TLS)", source, scheme)
}

// credentials returns the user and password of ui. A user needs a
// password: AUTH has none without one.
func credentials(ui *url.Userinfo, source string) (user, password string, err error) {
	if ui == nil {
		return "", "", nil
	}
	p, ok := ui.Password()
	if !ok || p == "" {
		return "", "", usagef("%s: the user %q has no password: want user:password@, or :password@ for the default user", source, ui.Username())
	}
	return ui.Username(), p, nil
}

// hostPort checks host:port, and adds port 6379 to a bare host.
func hostPort(s, source string) (string, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		if strings.Contains(err.Error(), "missing port") && s != "" {
			host, port = strings.Trim(s, "[]"), "6379"
		} else {
			return "", usagef("%s: %q is not host:port", source, s)
		}
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || host == "" {
		return "", usagef("%s: %q is not host:port", source, s)
	}
	return net.JoinHostPort(host, port), nil
}

// dbNumber parses the path of a URL: "", "/" or "/N".
func dbNumber(path, source string) (int, error) {
	p := strings.TrimPrefix(path, "/")
	if p == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 0 {
		return 0, usagef("%s: the database %q is not a number", source, p)
	}
	return n, nil
}

// redact returns s with the password of a URL's credentials replaced by
// xxxxx, for messages. It works on text that may not parse.
func redact(s string) string {
	i := strings.Index(s, "://")
	if i < 0 {
		i = -3 // credentials without a scheme, which the parsers refuse
	}
	rest := s[i+3:]
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return s
	}
	info := rest[:at]
	if j := strings.IndexByte(info, '@'); j >= 0 { // a Sentinel's name follows the credentials
		at, info = j, info[:j]
	}
	user, _, ok := strings.Cut(info, ":")
	if !ok {
		return s
	}
	return s[:i+3] + user + ":xxxxx" + rest[at:]
}

// server is where a command's clients connect: the target, or an
// embedded miniredis.
type server struct {
	t       target
	tls     *tls.Config // nil without TLS
	mini    *miniredis.Miniredis
	timeout time.Duration // bounds dialing and each read and write

	observer *observe.Observer // of every client's backend, if set
}

// openServer connects to the server the flags name, and checks that it
// answers a PING within the timeout; for an optional command without one,
// it starts an embedded miniredis. An error says what to check: where the
// server is, the credentials, or TLS.
func openServer(ctx context.Context, e *env, f *connFlags) (*server, error) {
	t, err := f.target()
	if err != nil {
		return nil, err
	}
	if t.kind == "" {
		m := miniredis.NewMiniRedis()
		if err := m.Start(); err != nil {
			return nil, err
		}
		m.ClockTTL(true) // leases expire on the clock, as on a real server
		return &server{t: target{kind: serverStandalone, addrs: []string{m.Addr()}}, mini: m, timeout: f.timeout}, nil
	}
	s := &server{t: t, timeout: f.timeout}
	if t.tls {
		if s.tls, err = f.tlsConfig(); err != nil {
			return nil, err
		}
		if f.tlsInsecure {
			fmt.Fprintf(e.stderr, "dsync: warning: -tls-insecure: the certificate of %s is not verified; whoever stands between here and the server can read and change what passes, the password included\n", t)
		}
	}
	c := s.client()
	defer c.close()
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	if err := c.rc.Ping(ctx).Err(); err != nil {
		return nil, connectError(t, f.timeout, err)
	}
	return s, nil
}

// tlsConfig returns the TLS settings of the flags: the system's CAs, or
// -tls-ca's, or no verification with -tls-insecure. The server's name is
// checked against the host it is dialed at (crypto/tls does that when
// ServerName is empty), node by node on a cluster.
func (f *connFlags) tlsConfig() (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: f.tlsInsecure}
	if f.tlsCA != "" {
		pem, err := os.ReadFile(f.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("-tls-ca: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-tls-ca: no PEM certificate in %s", f.tlsCA)
		}
	}
	return c, nil
}

// The three reasons a server cannot be reached, told apart by errors.Is.
var (
	errNoServer    = errors.New("no server")
	errCredentials = errors.New("credentials refused")
	errTLS         = errors.New("TLS failed")
)

// connectError says why the first call to t failed, and what to check.
func connectError(t target, timeout time.Duration, err error) error {
	where := "the host and port (" + t.source + ")"
	switch {
	case isCredentialError(err):
		if strings.Contains(err.Error(), "NOAUTH") {
			return fmt.Errorf("%w: %s wants a password (%v): check that %s has one, as in redis://user:password@host:port (:password@ for the default user); "+
				"$%s keeps it off the command line", errCredentials, t, err, t.source, envRedis)
		}
		return fmt.Errorf("%w: %s refused the user and password of %s (%v): check both, and that the user is on (ACL LIST)", errCredentials, t, t.source, err)
	case isTLSError(err):
		var rh tls.RecordHeaderError
		if errors.As(err, &rh) {
			return fmt.Errorf("%w: %s does not answer in TLS (%v): use redis:// for a server without TLS, or the port that serves TLS", errTLS, t, err)
		}
		return fmt.Errorf("%w: TLS with %s failed (%v): check -tls-ca (the CA that signed the server's certificate; default: the system's), "+
			"that the certificate names the host you gave, and that %s serves TLS", errTLS, t, err, where)
	case isDialError(err):
		return fmt.Errorf("%w: cannot connect to %s (%v): check %s, and that the server runs and can be reached from here", errNoServer, t, err, where)
	case isTimeout(err) && t.tls && speaksPlain(t.addrs[0], timeout):
		return fmt.Errorf("%w: %s does not answer in TLS but in plain text: check the scheme (redis:// for a server without TLS) and the port (the one that serves TLS)", errTLS, t)
	case !t.tls && (isTimeout(err) || isClosed(err)) && speaksTLS(t.addrs[0], timeout):
		return fmt.Errorf("%w: %s answers in TLS only: check the scheme (rediss:// for a server with TLS, with -tls-ca if its CA is not the system's)", errTLS, t)
	case isTimeout(err):
		return fmt.Errorf("%w: %s did not answer within %v (%v): check %s, that it is a Redis server (one with TLS wants rediss://), and that it is not overloaded",
			errNoServer, t, timeout, err, where)
	case isClosed(err):
		return fmt.Errorf("%w: %s closed the connection (%v): check %s, and if the server wants TLS, use rediss://", errNoServer, t, err, where)
	}
	return fmt.Errorf("connect to %s: %w", t, err)
}

// speaksPlain reports whether the server at addr answers a PING in plain
// text: one that a TLS handshake got no answer from, as a server without
// TLS waits for the end of a line that a ClientHello does not have.
func speaksPlain(addr string, timeout time.Duration) bool {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	b := make([]byte, 1)
	_, err = io.ReadFull(c, b)
	return err == nil && (b[0] == '+' || b[0] == '-')
}

// isCredentialError reports whether the server refused AUTH, or wants it.
func isCredentialError(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	return redis.IsAuthError(err) || strings.Contains(msg, "WRONGPASS") || strings.Contains(msg, "NOAUTH") ||
		strings.Contains(msg, "invalid password") || strings.Contains(msg, "without any password configured")
}

// isTLSError reports whether err comes from the TLS handshake.
func isTLSError(err error) bool {
	var (
		rh tls.RecordHeaderError
		ae tls.AlertError
		cv *tls.CertificateVerificationError
		ua x509.UnknownAuthorityError
		he x509.HostnameError
		ci x509.CertificateInvalidError
	)
	return errors.As(err, &rh) || errors.As(err, &ae) || errors.As(err, &cv) || errors.As(err, &ua) ||
		errors.As(err, &he) || errors.As(err, &ci) || strings.Contains(err.Error(), "tls: ")
}

// isDialError reports whether err is a connection that could not be
// made: nothing listens, no route, an unknown host.
func isDialError(err error) bool {
	var (
		oe *net.OpError
		de *net.DNSError
	)
	return errors.As(err, &de) || errors.As(err, &oe) && oe.Op == "dial"
}

// isClosed reports whether the peer closed the connection.
func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "connection reset")
}

// speaksTLS reports whether the server at addr completes a TLS handshake,
// whatever its certificate.
func speaksTLS(addr string, timeout time.Duration) bool {
	d := &net.Dialer{Timeout: timeout}
	c, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// isTimeout reports whether err is a deadline or a timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

func (s *server) String() string {
	if s.mini != nil {
		return "embedded miniredis at " + s.mini.Addr()
	}
	return s.t.String()
}

func (s *server) embedded() bool { return s.mini != nil }

func (s *server) close() {
	if s.mini != nil {
		s.mini.Close()
	}
}

// client is one simulated process: a go-redis client, with its pools,
// and a backend of its own.
type client struct {
	rc redis.UniversalClient
	b  *goredis.Backend
}

// client returns a new client of the server. Its dials, reads and writes
// are bounded by the server's timeout, and each call by its context's
// deadline (ContextTimeoutEnabled), so that a server that accepts and
// never answers is an error, not a hang. It speaks RESP2 and sends no
// CLIENT SETINFO: nothing but AUTH and SELECT before the first command,
// which every server since Redis 6 takes.
func (s *server) client() *client {
	var rc redis.UniversalClient
	t := s.t
	switch t.kind {
	case serverCluster:
		rc = redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: t.addrs, Username: t.user, Password: t.password, TLSConfig: s.tls,
			Protocol: 2, DisableIdentity: true, ContextTimeoutEnabled: true, DialerRetries: 1,
			DialTimeout: s.timeout, ReadTimeout: s.timeout, WriteTimeout: s.timeout,
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		})
	case serverSentinel:
		rc = redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: t.master, SentinelAddrs: t.addrs, Username: t.user, Password: t.password, DB: t.db, TLSConfig: s.tls,
			Protocol: 2, DisableIdentity: true, ContextTimeoutEnabled: true, DialerRetries: 1,
			DialTimeout: s.timeout, ReadTimeout: s.timeout, WriteTimeout: s.timeout,
		})
	default:
		rc = redis.NewClient(&redis.Options{
			Addr: t.addrs[0], Username: t.user, Password: t.password, DB: t.db, TLSConfig: s.tls,
			Protocol: 2, DisableIdentity: true, ContextTimeoutEnabled: true, DialerRetries: 1,
			DialTimeout: s.timeout, ReadTimeout: s.timeout, WriteTimeout: s.timeout,
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		})
	}
	c := &client{rc: rc, b: goredis.New(rc, goredis.WithTimeout(s.timeout))}
	if s.observer != nil {
		observe.Set(c.b, s.observer)
	}
	return c
}

// nodes returns a client of each primary of the server: every master of
// a cluster, sorted by address, or the one primary. They belong to c.
func (c *client) nodes(ctx context.Context) ([]*redis.Client, error) {
	cc, ok := c.rc.(*redis.ClusterClient)
	if !ok {
		return []*redis.Client{c.rc.(*redis.Client)}, nil
	}
	var (
		mu    sync.Mutex
		nodes []*redis.Client
	)
	err := cc.ForEachMaster(ctx, func(_ context.Context, n *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		nodes = append(nodes, n)
		return nil
	})
	slices.SortFunc(nodes, func(a, b *redis.Client) int { return strings.Compare(a.Options().Addr, b.Options().Addr) })
	return nodes, err
}

func (c *client) close() {
	c.b.Close()
	c.rc.Close()
	observe.Set(c.b, nil)
}

// quietLogger drops go-redis's log lines: the commands report what fails
// in their own words.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func init() { redis.SetLogger(quietLogger{}) }
