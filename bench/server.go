package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gomodule/redigo/redis"
)

// admin runs the harness's own commands on the server under test: round
// trip probes, INFO commandstats, CLIENT LIST. They are not counted in any
// implementation's numbers.
type admin struct {
	addr string
}

func (a admin) do(cmd string, args ...any) (any, error) {
	c, err := redis.Dial("tcp", a.addr, redis.DialConnectTimeout(2*time.Second))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.Do(cmd, args...)
}

// serverCalls returns the server's count of executed commands, including
// those called from scripts, excluding the harness's own INFO and CLIENT.
func (a admin) serverCalls() (int64, error) {
	s, err := redis.String(a.do("INFO", "commandstats"))
	if err != nil {
		return 0, err
	}
	var total int64
	for _, line := range strings.Split(s, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok || strings.HasPrefix(name, "cmdstat_info") || strings.HasPrefix(name, "cmdstat_client") {
			continue
		}
		n, _, _ := strings.Cut(rest, ",")
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("commandstats line %q: %w", line, err)
		}
		total += v
	}
	return total, nil
}

// scriptTime returns how long the server has spent running scripts
// (EVALSHA and EVAL, the commands they call included), from INFO
// commandstats: the time of the commands themselves, without reading the
// request or writing the reply, which INFO cpu counts too.
func (a admin) scriptTime() (time.Duration, error) {
	s, err := redis.String(a.do("INFO", "commandstats"))
	if err != nil {
		return 0, err
	}
	return namedCommandsTime(s, "evalsha", "eval")
}

// namedCommandsTime sums the usec of the named commands in an INFO
// commandstats reply.
func namedCommandsTime(info string, names ...string) (time.Duration, error) {
	var total time.Duration
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !slices.Contains(names, strings.TrimPrefix(name, "cmdstat_")) {
			continue
		}
		for _, field := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(field, "=")
			if k != "usec" {
				continue
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("commandstats line %q: %w", line, err)
			}
			total += time.Duration(n) * time.Microsecond
		}
	}
	return total, nil
}

// pubsubConns counts the server's pub/sub connections.
func (a admin) pubsubConns() int {
	s, err := redis.String(a.do("CLIENT", "LIST", "TYPE", "pubsub"))
	if err != nil {
		return -1
	}
	n := 0
	for _, line := range strings.Split(s, "\n") {
		if strings.TrimSpace(line) != "" {
			n++
		}
	}
	return n
}

// version returns the server's redis_version.
func (a admin) version() string {
	s, err := redis.String(a.do("INFO", "server"))
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return "?"
}

// roundTrip returns the median time of a PING on an open connection: the
// unit in which handoff is expressed.
func (a admin) roundTrip(ctx context.Context) (time.Duration, error) {
	c, err := redis.DialContext(ctx, "tcp", a.addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	ds := make([]time.Duration, 0, 500)
	for i := 0; i < 500; i++ {
		start := time.Now()
		if _, err := c.Do("PING"); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(start))
	}
	return percentile(sorted(ds), 0.5), nil
}

// Floor is what this machine charges any pub/sub-woken handoff, measured
// with plain connections and no locking at all, each sample taken after
// 20ms idle as in Handoff: a round trip from idle, a PUBLISH reaching an
// idle subscriber, and that plus the subscriber's own round trip.
type Floor struct {
	ColdRoundTrip     time.Duration
	Delivery          time.Duration
	DeliveryRoundTrip time.Duration
}

func (a admin) floor(ctx context.Context, rounds int) (Floor, error) {
	pub, err := redis.DialContext(ctx, "tcp", a.addr)
	if err != nil {
		return Floor{}, err
	}
	defer pub.Close()
	subConn, err := redis.DialContext(ctx, "tcp", a.addr)
	if err != nil {
		return Floor{}, err
	}
	defer subConn.Close()
	other, err := redis.DialContext(ctx, "tcp", a.addr)
	if err != nil {
		return Floor{}, err
	}
	defer other.Close()
	psc := redis.PubSubConn{Conn: subConn}
	if err := psc.Subscribe("bench:floor"); err != nil {
		return Floor{}, err
	}
	if _, ok := psc.Receive().(redis.Subscription); !ok {
		return Floor{}, fmt.Errorf("floor: subscribe not confirmed")
	}
	var cold, delivery, both []time.Duration
	got := make(chan time.Time)
	done := make(chan time.Time)
	go func() {
		for {
			if _, ok := psc.Receive().(redis.Message); !ok {
				close(got)
				return
			}
			got <- time.Now()
			other.Do("PING")
			done <- time.Now()
		}
	}()
	for i := 0; i < rounds; i++ {
		time.Sleep(20 * time.Millisecond)
		start := time.Now()
		if _, err := pub.Do("PING"); err != nil {
			return Floor{}, err
		}
		cold = append(cold, time.Since(start))
		time.Sleep(20 * time.Millisecond)
		start = time.Now()
		if _, err := pub.Do("PUBLISH", "bench:floor", "x"); err != nil {
			return Floor{}, err
		}
		delivery = append(delivery, (<-got).Sub(start))
		both = append(both, (<-done).Sub(start))
	}
	psc.Unsubscribe()
	subConn.Close()
	for range got {
	}
	return Floor{
		ColdRoundTrip:     percentile(sorted(cold), 0.5),
		Delivery:          percentile(sorted(delivery), 0.5),
		DeliveryRoundTrip: percentile(sorted(both), 0.5),
	}, nil
}
