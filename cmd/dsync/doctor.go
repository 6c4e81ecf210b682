package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/backend/goredis"
	"github.com/dsyncgo/dsync/internal/keys"
)

const doctorDoc = `doctor checks the settings of a Redis server that break locks without an
error, and says what to change. Each check is ok, a warning (a risk to
know of, or something doctor could not read) or a failure (locks are not
safe, or do not work, on this server):

  version      the server is Redis 6.0 or later (or says which compatible
               server it is)
  eviction     maxmemory-policy is noeviction: any other policy can evict a
               held lock's key (dsync's keys carry TTLs, so volatile-*
               policies evict them too), and another process then takes
               the lock while the holder works on; and the server is below
               its maxmemory, at which it refuses every write
  persistence  AOF is on: without it a restart forgets the holds since the
               last snapshot, or all of them
  replication  the server is a primary, and with replicas,
               min-replicas-to-write is set: a failover to a replica that
               missed an acquisition gives the lock to two processes
  cluster      in cluster mode the cluster serves every hash slot
               (cluster_state:ok), and the server hashes dsync's keys as
               dsync does (one hash tag per lock); doctor sees one node only
  scripting    EVAL and EVALSHA run and may write keys under -prefix (ACL,
               rename-command, a full server, a slot not served)
  pubsub       SUBSCRIBE and PUBLISH work on channels under -prefix (ACL:
               Redis 7 gives new users no channels)
  latency      the round-trip time, of which an uncontended lock+unlock
               takes two

The probes write one key and publish on one channel under
<prefix>:doctor:{<random id>}, and delete the key. With -cluster, every
check runs on every primary of the cluster (the key then in a slot each
serves); given one node of a cluster, doctor checks that node only.

With -json it prints one JSON object:
  server    the address checked
  failures  the number of failed checks
  warnings  the number of warnings
  checks    one object per check: name, node (with -cluster: the
            primary checked), status ("ok", "warn" or "fail"), detail,
            and fix (what to change; absent if ok)

doctor exits with status 1 if a check failed (or the server cannot be
reached), and 0 otherwise, warnings or not.`

// A check's status.
const (
	statusOK   = "ok"
	statusWarn = "warn"
	statusFail = "fail"
)

// doctorCheck is the outcome of one check; its JSON form is in doctorDoc.
type doctorCheck struct {
	Name   string `json:"name"`
	Node   string `json:"node,omitempty"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// doctorReport is doctor's output.
type doctorReport struct {
	Server   string        `json:"server"`
	Failures int           `json:"failures"`
	Warnings int           `json:"warnings"`
	Checks   []doctorCheck `json:"checks"`

	desc string // the server, as the text report names it
}

// probe is what the checks read from one server: the server, or one
// primary of a cluster.
type probe struct {
	rc        *redis.Client   // the node
	b         backend.Backend // scripts on the node
	timeout   time.Duration
	prefix    string
	id        string            // of the probe key and channel
	info      map[string]string // INFO's fields
	clustered bool              // doctor checks every primary of the cluster
}

// doctorChecks are the checks, in the order doctor runs them.
var doctorChecks = []struct {
	name string
	run  func(ctx context.Context, p *probe) doctorCheck
}{
	{"version", checkVersion},
	{"eviction", checkEviction},
	{"persistence", checkPersistence},
	{"replication", checkReplication},
	{"cluster", checkCluster},
	{"scripting", checkScripting},
	{"pubsub", checkPubSub},
	{"latency", checkLatency},
}

// doctor checks a server's settings that break locks.
func doctor(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "doctor", doctorDoc+"\n\n"+connUsage(true)+" Else it is localhost:6379.")
	conn := connFlags{env: true, fallback: "localhost:6379"}
	conn.register(fs, envHelp("localhost:6379"))
	prefix := fs.String("prefix", keys.DefaultPrefix, "key `prefix` of the locks, for the scripting and pub/sub probes")
	asJSON := fs.Bool("json", false, "print one JSON object")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("unexpected arguments %q", pos)
	}
	t, err := conn.target()
	if err != nil {
		return err
	}
	if _, err := keys.Base(*prefix, "doctor", "x"); err != nil {
		return usagef("%v", err)
	}

	srv, err := openServer(ctx, e, &conn)
	if err != nil {
		return err
	}
	defer srv.close()
	c := srv.client()
	defer c.close()
	nctx, cancel := context.WithTimeout(ctx, conn.timeout)
	nodes, err := c.nodes(nctx)
	cancel()
	if err != nil {
		return fmt.Errorf("find the primaries of %s: %w", t, err)
	}
	rep := doctorReport{Server: t.addr(), Checks: []doctorCheck{}, desc: t.String()}
	for _, n := range nodes {
		p := &probe{rc: n, b: c.b, timeout: conn.timeout, prefix: *prefix, id: dsync.NewID()[:12], clustered: t.kind == serverCluster}
		node := ""
		if p.clustered {
			// A backend of the node's own: the probe script runs there,
			// on a key of a slot it serves.
			b := goredis.New(n, goredis.WithTimeout(conn.timeout))
			defer b.Close()
			p.b, node = b, n.Options().Addr
		}
		if err := rep.run(ctx, p, node); err != nil {
			return err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		rep.writeText(e.stdout)
	}
	if rep.Failures > 0 {
		return &exitError{exitFailure, nil}
	}
	return nil
}

// run runs every check on the server p probes, and adds them to r with
// node as their node.
func (r *doctorReport) run(ctx context.Context, p *probe, node string) error {
	ictx, cancel := context.WithTimeout(ctx, p.timeout)
	info, err := p.rc.Info(ictx).Result()
	cancel()
	if err != nil {
		if node != "" {
			return fmt.Errorf("INFO on %s: %w", node, err)
		}
		return fmt.Errorf("INFO: %w", err)
	}
	p.info = parseInfo(info)
	for _, dc := range doctorChecks {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		ch := dc.run(ctx, p)
		ch.Name, ch.Node = dc.name, node
		switch ch.Status {
		case statusFail:
			r.Failures++
		case statusWarn:
			r.Warnings++
		}
		r.Checks = append(r.Checks, ch)
	}
	return nil
}

// writeText prints the report for a person: failures first, then
// warnings, then what is fine.
func (r doctorReport) writeText(w io.Writer) {
	fmt.Fprintf(w, "dsync doctor: %s\n\n", r.desc)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, status := range []string{statusFail, statusWarn, statusOK} {
		for _, ch := range r.Checks {
			if ch.Status != status {
				continue
			}
			if ch.Node != "" {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", strings.ToUpper(ch.Status), ch.Name, ch.Node, ch.Detail)
				if ch.Fix != "" {
					fmt.Fprintf(tw, "\t\t\tfix: %s\n", ch.Fix)
				}
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", strings.ToUpper(ch.Status), ch.Name, ch.Detail)
			if ch.Fix != "" {
				fmt.Fprintf(tw, "\t\tfix: %s\n", ch.Fix)
			}
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%s, %s", plural(r.Failures, "failure"), plural(r.Warnings, "warning"))
	switch {
	case r.Failures > 0:
		fmt.Fprintln(w, ": locks are not safe on this server until the failures are fixed")
	case r.Warnings > 0:
		fmt.Fprintln(w, ": the warnings are risks to know of")
	default:
		fmt.Fprintln(w)
	}
}

// parseInfo returns the fields of an INFO reply.
func parseInfo(s string) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") {
			m[k] = v
		}
	}
	return m
}

// config returns the value of a configuration parameter.
func (p *probe) config(ctx context.Context, name string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	v, err := p.rc.ConfigGet(ctx, name).Result()
	if err != nil {
		return "", fmt.Errorf("CONFIG GET %s: %w", name, err)
	}
	s, ok := v[name]
	if !ok {
		return "", fmt.Errorf("CONFIG GET %s: no such parameter", name)
	}
	return s, nil
}

// configInt is config for an integer parameter.
func (p *probe) configInt(ctx context.Context, name string) (int, error) {
	s, err := p.config(ctx, name)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("CONFIG GET %s: %q is not a number", name, s)
	}
	return n, nil
}

func checkOK(format string, args ...any) doctorCheck {
	return doctorCheck{Status: statusOK, Detail: fmt.Sprintf(format, args...)}
}

func checkWarn(fix, format string, args ...any) doctorCheck {
	return doctorCheck{Status: statusWarn, Detail: fmt.Sprintf(format, args...), Fix: fix}
}

func checkFail(fix, format string, args ...any) doctorCheck {
	return doctorCheck{Status: statusFail, Detail: fmt.Sprintf(format, args...), Fix: fix}
}

// minVersion is the oldest Redis dsync supports (DESIGN.md).
const minMajor, minMinor = 6, 0

func checkVersion(_ context.Context, p *probe) doctorCheck {
	v := p.info["redis_version"]
	if v == "" {
		return checkWarn("check by hand that the server runs Lua scripts and pub/sub as Redis 6.0 does",
			"the server reports no redis_version")
	}
	name := "Redis " + v
	for _, other := range []struct{ field, name string }{
		{"valkey_version", "Valkey"}, {"dragonfly_version", "Dragonfly"}, {"kvrocks_version", "Kvrocks"},
	} {
		if ov := p.info[other.field]; ov != "" {
			name = fmt.Sprintf("%s %s (redis_version %s)", other.name, ov, v)
		}
	}
	parts := strings.SplitN(v, ".", 3)
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := 0, error(nil)
	if len(parts) > 1 {
		minor, err2 = strconv.Atoi(parts[1])
	}
	switch {
	case err1 != nil || err2 != nil:
		return checkWarn("check by hand that it is 6.0 or later", "%s: cannot read the version", name)
	case major < minMajor || major == minMajor && minor < minMinor:
		return checkFail("upgrade to Redis 6.0 or later", "%s: dsync needs %d.%d or later", name, minMajor, minMinor)
	}
	return checkOK("%s", name)
}

func checkEviction(ctx context.Context, p *probe) doctorCheck {
	policy := p.info["maxmemory_policy"]
	if policy == "" {
		var err error
		if policy, err = p.config(ctx, "maxmemory-policy"); err != nil {
			return checkWarn("check by hand that maxmemory-policy is noeviction", "cannot read maxmemory-policy: %v", err)
		}
	}
	maxmem, _ := strconv.ParseInt(p.info["maxmemory"], 10, 64)
	if policy != "noeviction" {
		limit := fmt.Sprintf("maxmemory %d bytes", maxmem)
		if maxmem == 0 {
			limit = "no maxmemory yet, so nothing is evicted until one is set"
		}
		return checkFail("CONFIG SET maxmemory-policy noeviction, and set it in redis.conf: a full server then refuses writes, and acquisitions fail instead of holds vanishing (or give the locks a server of their own)",
			"maxmemory-policy %s (%s) evicts keys when memory runs out: a held lock's key can vanish and another process take the lock while the holder works on; dsync's keys carry TTLs, so volatile-* policies evict them too", policy, limit)
	}
	used, _ := strconv.ParseInt(p.info["used_memory"], 10, 64)
	if maxmem > 0 && used >= maxmem {
		return checkFail("raise maxmemory (CONFIG SET maxmemory, and in redis.conf) or free memory, and give the locks a server whose other data cannot fill it",
			"maxmemory-policy noeviction, and the server is at its maxmemory (%d%% used): it refuses every write, lock acquisitions and renewals included", used*100/maxmem)
	}
	if maxmem > 0 && used*10 >= maxmem*9 {
		return checkWarn("raise maxmemory or free memory",
			"maxmemory-policy noeviction, but %d%% of maxmemory is used: at the limit every write fails, lock acquisitions and renewals included", used*100/maxmem)
	}
	return checkOK("maxmemory-policy noeviction: lock keys are never evicted")
}

func checkPersistence(ctx context.Context, p *probe) doctorCheck {
	const fix = "CONFIG SET appendonly yes (appendfsync everysec), and set both in redis.conf"
	aof, err := p.config(ctx, "appendonly")
	if err != nil {
		switch p.info["aof_enabled"] {
		case "1":
			return checkOK("AOF is on (appendfsync unknown: %v)", err)
		case "":
			return checkWarn("check by hand that AOF is on", "cannot read the persistence settings: %v", err)
		}
		return checkWarn(fix, "AOF is off, and whether RDB snapshots are on cannot be read (%v): a restart loses the holds since the last snapshot, or all of them", err)
	}
	fsync, _ := p.config(ctx, "appendfsync")
	save, _ := p.config(ctx, "save")
	const learn = "; holders learn of the loss when their connection is back (Done), and tokens keep increasing"
	switch {
	case aof == "yes" && fsync == "no":
		return checkWarn("CONFIG SET appendfsync everysec",
			"AOF is on with appendfsync no: a crash of the machine loses the holds of the last ~30s"+learn)
	case aof == "yes":
		return checkOK("AOF is on (appendfsync %s): a restart keeps the holds", fsync)
	case save != "":
		return checkWarn(fix, "AOF is off, RDB snapshots only (save %q): a restart loses the holds taken since the last snapshot"+learn, save)
	}
	return checkWarn(fix, "persistence is off (no AOF, no RDB snapshots): a restart forgets every hold"+learn)
}

func checkReplication(ctx context.Context, p *probe) doctorCheck {
	role := p.info["role"]
	if role == "slave" || role == "replica" {
		return checkFail("point -redis, and the services' clients, at the primary",
			"this server is a replica of %s:%s: dsync's scripts write, which a replica refuses (or keeps to itself)",
			p.info["master_host"], p.info["master_port"])
	}
	n, _ := strconv.Atoi(p.info["connected_slaves"])
	if n == 0 {
		return checkOK("a primary without replicas: no failover can lose a hold (and none takes over if it dies)")
	}
	min, err := p.configInt(ctx, "min-replicas-to-write")
	if err != nil {
		return checkWarn("check by hand that min-replicas-to-write is at least 1",
			"%s connected, and min-replicas-to-write cannot be read: %v", plural(n, "replica"), err)
	}
	if min == 0 {
		return checkWarn("CONFIG SET min-replicas-to-write 1 and min-replicas-max-lag 10 (writes then need a replica in sync), or have clients wait for replicas (backend/goredis WithReplicaAck); fencing tokens protect the resource either way",
			"%s connected, replication is asynchronous and min-replicas-to-write is 0: a failover can promote a replica that missed the last acquisitions, and two processes hold one lock", plural(n, "replica"))
	}
	if good, err := strconv.Atoi(p.info["min_slaves_good_slaves"]); err == nil && good < min {
		return checkFail("bring the replicas back in sync, or lower min-replicas-to-write",
			"min-replicas-to-write is %d and only %d replicas are in sync: the server refuses writes, so no lock can be taken or released", min, good)
	}
	lag, _ := p.configInt(ctx, "min-replicas-max-lag")
	return checkOK("%s; writes need %d in sync (lag at most %ds), which narrows what a failover can lose without closing it: replication stays asynchronous",
		plural(n, "replica"), min, lag)
}

func checkCluster(ctx context.Context, p *probe) doctorCheck {
	if p.info["cluster_enabled"] != "1" {
		return checkOK("not a cluster: every lock's keys are on this server")
	}
	if ch, ok := checkClusterState(ctx, p); !ok {
		return ch
	}
	// A lock's keys must share a slot, which dsync computes from its hash
	// tag: the server must agree, names with braces included.
	for _, name := range []string{"orders:42", "a{b}c", "}{"} {
		base, err := keys.Base(p.prefix, kindMutex, name)
		if err != nil {
			return checkWarn("choose another -prefix", "cannot build a key: %v", err)
		}
		for _, k := range []string{base, base + ":fence"} {
			kctx, cancel := context.WithTimeout(ctx, p.timeout)
			slot, err := p.rc.ClusterKeySlot(kctx, k).Result()
			cancel()
			if err != nil {
				return checkWarn("check by hand that CLUSTER KEYSLOT of a lock's keys agree", "cluster mode; CLUSTER KEYSLOT: %v", err)
			}
			if slot != int64(keys.Slot(k)) {
				return checkFail("use a server that hashes keys by their {hash tag} as Redis Cluster does",
					"cluster mode, but the server puts %q in slot %d where dsync expects %d: a lock's scripts fail with CROSSSLOT", k, slot, keys.Slot(k))
			}
		}
	}
	if p.clustered {
		return checkOK("cluster mode: each lock's keys share one slot, as dsync expects")
	}
	return checkWarn("run doctor -cluster host:port,... to check every primary, give every dsync command -cluster, and services a cluster client (backend/goredis with a ClusterClient)",
		"cluster mode: each lock's keys share one slot, as dsync expects, but doctor checked this node only, and a lock whose slot another node serves is a MOVED error through it")
}

// checkClusterState checks CLUSTER INFO: a cluster whose state is not ok
// refuses the scripts of the slots it does not serve (CLUSTERDOWN). It
// returns false with the failure, or true if the state is ok or cannot
// be read.
func checkClusterState(ctx context.Context, p *probe) (doctorCheck, bool) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	s, err := p.rc.ClusterInfo(ctx).Result()
	if err != nil {
		return doctorCheck{}, true // the KEYSLOT checks say what is wrong
	}
	info := parseInfo(s)
	if info["cluster_state"] == "ok" {
		return doctorCheck{}, true
	}
	assigned, _ := strconv.Atoi(info["cluster_slots_assigned"])
	if assigned == 0 {
		return checkFail("create the cluster (redis-cli --cluster create host:port ...) or assign this node slots (CLUSTER ADDSLOTS), or give dsync the nodes of a cluster that works",
			"cluster mode, but no hash slot is assigned to any node this one knows (cluster_state:%s): every lock's scripts fail with CLUSTERDOWN", info["cluster_state"]), false
	}
	ok, _ := strconv.Atoi(info["cluster_slots_ok"])
	return checkFail("bring back the masters that failed, or assign their slots to others (redis-cli --cluster fix); with cluster-require-full-coverage no, the slots still served keep working meanwhile",
		"cluster_state:%s, %d of 16384 hash slots served: the scripts of locks on the others fail with CLUSTERDOWN", info["cluster_state"], ok), false
}

// probeScript writes and deletes a key and reads the server's clock, as
// every lock script does.
var probeScript = backend.NewScript(`redis.call('SET', KEYS[1], ARGV[1], 'PX', 10000)
local v = redis.call('GET', KEYS[1])
redis.call('DEL', KEYS[1])
return {v, redis.call('TIME')[1]}`)

func checkScripting(ctx context.Context, p *probe) doctorCheck {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	key, err := p.probeKey(ctx)
	if err != nil {
		return checkWarn("choose another -prefix", "cannot build a key: %v", err)
	}
	reply, err := p.b.Eval(ctx, probeScript, []string{key}, p.id)
	if err != nil {
		return checkFail(commandFix(err, fmt.Sprintf("ACL SETUSER <user> +@scripting ~%s:*", p.prefix), "EVAL and EVALSHA"),
			"a Lua script that writes %s failed: %v", key, err)
	}
	if r, err := backend.Array(reply, 2); err != nil || r[0] != p.id {
		return checkFail("check that what stands between dsync and the server (a proxy) passes scripts and their replies on unchanged",
			"the probe script returned %v, not what it wrote", reply)
	}
	return checkOK("EVAL and EVALSHA run scripts that write keys under %s:*", p.prefix)
}

// probeKey returns the key of the scripting probe: under the prefix,
// and on a cluster node in a hash slot the node serves, if it serves one
// (else a script on it fails with MOVED or CLUSTERDOWN, which is what the
// check reports then). The probe's id changes to match.
func (p *probe) probeKey(ctx context.Context) (string, error) {
	key, err := keys.Base(p.prefix, "doctor", p.id)
	if err != nil || p.info["cluster_enabled"] != "1" {
		return key, err
	}
	id, err1 := p.rc.ClusterMyID(ctx).Result()
	//lint:ignore SA1019 CLUSTER SHARDS is Redis 7's; dsync supports 6.0
	slots, err2 := p.rc.ClusterSlots(ctx).Result()
	if err1 != nil || err2 != nil {
		return key, nil
	}
	var served []redis.ClusterSlot
	for _, s := range slots {
		if len(s.Nodes) > 0 && s.Nodes[0].ID == id {
			served = append(served, s)
		}
	}
	if len(served) == 0 {
		return key, nil
	}
	// One slot in 16384 at worst: 1<<20 tries miss it with probability
	// e^-64.
	for i := range 1 << 20 {
		id := p.id + strconv.Itoa(i)
		k, err := keys.Base(p.prefix, "doctor", id)
		if err != nil {
			return "", err
		}
		slot := int(keys.Slot(k))
		for _, s := range served {
			if s.Start <= slot && slot <= s.End {
				p.id = id
				return k, nil
			}
		}
	}
	return key, nil
}

func checkPubSub(ctx context.Context, p *probe) doctorCheck {
	channel, err := keys.Base(p.prefix, "doctor", p.id)
	if err != nil {
		return checkWarn("choose another -prefix", "cannot build a channel name: %v", err)
	}
	channel += ":wake"
	fix := fmt.Sprintf("ACL SETUSER <user> +subscribe +publish &%s:* (Redis 7 gives new users no channels: acl-pubsub-default)", p.prefix)
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	// A subscription of its own rather than the backend's: a refused
	// SUBSCRIBE is then the server's error, not a wait.
	ps := p.rc.Subscribe(ctx, channel)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		if isTimeout(err) || !isServerError(err) {
			return checkWarn(retryFix, "SUBSCRIBE %s: %v", channel, err)
		}
		return checkFail(commandFix(err, fix, "SUBSCRIBE"), "SUBSCRIBE %s failed: %v", channel, err)
	}
	if err := p.rc.Publish(ctx, channel, p.id).Err(); err != nil {
		return checkFail(commandFix(err, fix, "PUBLISH"), "PUBLISH %s failed: %v", channel, err)
	}
	for {
		m, err := ps.ReceiveMessage(ctx)
		if err != nil {
			return checkFail("check the server's pub/sub (a proxy in between?)",
				"a message published on %s did not arrive within %v: %v", channel, p.timeout, err)
		}
		if m.Payload == p.id {
			return checkOK("SUBSCRIBE and PUBLISH work on channels under %s:*", p.prefix)
		}
	}
}

// isServerError reports whether err is an error reply of the server.
func isServerError(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// retryFix is the fix of a check that could not talk to the server.
const retryFix = "run doctor again; if it fails the same way, look at the server's log and at its maxclients"

// commandFix returns the fix for commands the server refused with err:
// aclFix for an ACL refusal, the removal of a rename-command for an
// unknown command, and for the other refusals a server can send what
// they call for. Never "": a failed check says what to change.
func commandFix(err error, aclFix, commands string) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "NOPERM"):
		return aclFix
	case strings.Contains(msg, "unknown command"):
		return "the server does not know " + commands + ": remove the rename-command lines that disable them from redis.conf"
	case strings.Contains(msg, "READONLY"), strings.Contains(msg, "MASTERDOWN"):
		return "point -redis at the primary"
	case strings.Contains(msg, "OOM"):
		return "the server is at its maxmemory and, with noeviction, refuses every write, lock acquisitions and renewals included: " +
			"raise maxmemory (CONFIG SET maxmemory, and in redis.conf) or free memory, and give the locks a server whose other data cannot fill it"
	case strings.Contains(msg, "CLUSTERDOWN"):
		return "the cluster does not serve the key's hash slot (see the cluster check): assign every slot to a master " +
			"(redis-cli --cluster create, or --cluster fix), and bring back the masters that failed"
	case strings.Contains(msg, "MOVED"), strings.Contains(msg, "ASK "):
		return "another node of the cluster serves the key's hash slot: give dsync the cluster, not one of its nodes"
	case strings.Contains(msg, "LOADING"):
		return "the server is loading its data set into memory: run doctor again once it has"
	case strings.Contains(msg, "BUSY"):
		return "a script has run for longer than busy-reply-threshold and blocks the server: end it (SCRIPT KILL) and find the client that sent it"
	}
	return "the server refused " + commands + " with the error above, which dsync's locks need: change what it names"
}

// Latency thresholds: an uncontended lock+unlock takes two round trips.
const (
	latencyWarn = 10 * time.Millisecond
	latencyPing = 10 // PINGs timed
)

func checkLatency(ctx context.Context, p *probe) doctorCheck {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	// The first PING may dial; the timed ones reuse its connection.
	if err := p.rc.Ping(ctx).Err(); err != nil {
		return checkWarn(retryFix, "PING: %v", err)
	}
	var rtts []time.Duration
	for range latencyPing {
		start := time.Now()
		if err := p.rc.Ping(ctx).Err(); err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return checkWarn("run the server closer to its clients", "%d PINGs took over %v", latencyPing, p.timeout)
			}
			return checkWarn(retryFix, "PING: %v", err)
		}
		rtts = append(rtts, time.Since(start))
	}
	slices.Sort(rtts)
	median, worst := rtts[len(rtts)/2], rtts[len(rtts)-1]
	round := func(d time.Duration) time.Duration { return d.Round(time.Microsecond) }
	if median >= latencyWarn {
		return checkWarn("run the server closer to its clients",
			"round trip %v (median of %d PINGs, worst %v): an uncontended lock+unlock takes two, %v at least", round(median), latencyPing, round(worst), round(2*median))
	}
	return checkOK("round trip %v (median of %d PINGs, worst %v)", round(median), latencyPing, round(worst))
}
