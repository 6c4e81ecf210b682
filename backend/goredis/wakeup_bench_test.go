package goredis_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dsyncgo/dsync/backend/goredis"
	"github.com/dsyncgo/dsync/conformance/harness"
)

// BenchmarkClusterWakeup compares the two ways a release can wake a
// waiter on a 3-master cluster, with go-redis alone: a script on the
// lock's node publishes with PUBLISH, which the cluster bus copies to
// every node, to one subscriber connection on any node; or with SPUBLISH,
// which stays in the lock's shard, to one SSUBSCRIBE connection per
// master. Channels are spread over 64 slots. Each operation is one
// release-like script and the waiter's receipt of its message. It reports
// the servers' CPU per wake-up summed over every node (INFO cpu), and the
// subscriber connections.
func BenchmarkClusterWakeup(b *testing.B) {
	cl := harness.NewCluster(b, 3)
	ctx := context.Background()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	defer c.Close()
	const channels = 64
	var names []string
	for i := range channels {
		names = append(names, fmt.Sprintf("{wake%d}", i))
	}
	for _, mode := range []string{"PUBLISH", "PUBLISH-on-slot-node", "SPUBLISH", "PUBLISH-adapter"} {
		b.Run(mode, func(b *testing.B) {
			cmd, _, _ := strings.Cut(mode, "-")
			script := redis.NewScript(`-- KEYS: the lock. ARGV: channel.
redis.call('SET', KEYS[1], '1', 'PX', 1000)
return redis.call('` + cmd + `', ARGV[1], 'w')`)
			msgs := make(chan string, 16)
			var subs []*redis.PubSub
			defer func() {
				for _, ps := range subs {
					ps.Close()
				}
			}()
			switch mode {
			case "PUBLISH":
				ps := c.Subscribe(ctx)
				for _, n := range names {
					if err := ps.Subscribe(ctx, n+":wake"); err != nil {
						b.Fatal(err)
					}
				}
				subs = append(subs, ps)
			case "PUBLISH-adapter":
				// Through the adapter, as dsync's waiters subscribe.
				be := goredis.New(c)
				defer be.Close()
				for _, n := range names {
					sub, err := be.Subscribe(ctx, n+":wake")
					if err != nil {
						b.Fatal(err)
					}
					defer sub.Close()
					go func() {
						for {
							m, err := sub.Receive(ctx)
							if err != nil {
								return
							}
							msgs <- m.Channel
						}
					}()
				}
			default:
				byNode := map[string]*redis.PubSub{}
				for _, n := range names {
					m, err := c.MasterForKey(ctx, n)
					if err != nil {
						b.Fatal(err)
					}
					ps := byNode[m.Options().Addr]
					if ps == nil {
						if mode == "SPUBLISH" {
							ps = c.SSubscribe(ctx)
						} else {
							ps = m.Subscribe(ctx)
						}
						byNode[m.Options().Addr] = ps
						subs = append(subs, ps)
					}
					subscribe := ps.Subscribe
					if mode == "SPUBLISH" {
						subscribe = ps.SSubscribe
					}
					if err := subscribe(ctx, n+":wake"); err != nil {
						b.Fatal(err)
					}
				}
			}
			for _, ps := range subs {
				go func(ps *redis.PubSub) {
					for m := range ps.Channel() {
						msgs <- m.Channel
					}
				}(ps)
			}
			cpu := func() float64 {
				var sum float64
				for _, n := range cl.Nodes() {
					s, err := n.Do(ctx, "INFO", "cpu")
					if err != nil {
						b.Fatal(err)
					}
					text, _ := s.([]byte)
					for _, line := range strings.Split(string(text), "\n") {
						k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
						if k == "used_cpu_user" || k == "used_cpu_sys" {
							f, _ := strconv.ParseFloat(v, 64)
							sum += f
						}
					}
				}
				return sum
			}
			// Warm the script cache and the connections on every node, and
			// wait until every subscription is active.
			for _, n := range names {
				for try := 0; ; try++ {
					if err := script.Run(ctx, c, []string{n + ":lock"}, n+":wake").Err(); err != nil {
						b.Fatal(err)
					}
					select {
					case <-msgs:
					case <-time.After(100 * time.Millisecond):
						if try < 50 {
							continue
						}
						b.Fatalf("no wake-up on %s", n)
					}
					break
				}
			}
			for len(msgs) > 0 {
				<-msgs
			}
			before := cpu()
			b.ResetTimer()
			i := 0
			var lat []time.Duration
			for b.Loop() {
				start := time.Now()
				n := names[i%channels]
				i++
				if err := script.Run(ctx, c, []string{n + ":lock"}, n+":wake").Err(); err != nil {
					b.Fatal(err)
				}
				if got := <-msgs; got != n+":wake" {
					b.Fatalf("woken on %s, want %s", got, n+":wake")
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			conns, err := cl.Hooks().PubSubClients(ctx)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric((cpu()-before)*1e6/float64(i), "server-cpu-µs/op")
			b.ReportMetric(float64(conns), "sub-conns")
		})
	}
}
