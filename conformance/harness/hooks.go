package harness

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/gomodule/redigo/redis"

	"github.com/dsyncgo/dsync/conformance"
)

// hooks returns conformance hooks acting on every node that nodes returns
// (called anew each time: a failover changes the set), with restart as
// the Restart hook (nil for none).
func hooks(nodes func() []*Node, restart func(context.Context) error) conformance.Hooks {
	return conformance.Hooks{
		FlushScripts: func(ctx context.Context) error {
			return onEach(nodes(), func(n *Node) error {
				_, err := n.Do(ctx, "SCRIPT", "FLUSH")
				return err
			})
		},
		KillPubSub: func(ctx context.Context) error {
			return onEach(nodes(), func(n *Node) error { return killPubSub(ctx, n) })
		},
		KillClients: func(ctx context.Context) error {
			return onEach(nodes(), func(n *Node) error { return killClients(ctx, n) })
		},
		PubSubClients: func(ctx context.Context) (int, error) {
			var total atomic.Int64
			err := onEach(nodes(), func(n *Node) error {
				ids, err := pubSubClients(ctx, n)
				total.Add(int64(len(ids)))
				return err
			})
			return int(total.Load()), err
		},
		Subscribers: func(ctx context.Context, channel string) (int, error) {
			var total atomic.Int64
			err := onEach(nodes(), func(n *Node) error {
				a, err := redis.Values(n.Do(ctx, "PUBSUB", "NUMSUB", channel))
				if err == nil && len(a) == 2 {
					c, _ := redis.Int64(a[1], nil)
					total.Add(c)
				}
				return err
			})
			return int(total.Load()), err
		},
		ConnectionsReceived: func(ctx context.Context) (int64, error) {
			var total atomic.Int64
			err := onEach(nodes(), func(n *Node) error {
				info, err := n.info(ctx, "stats")
				if err != nil {
					return err
				}
				c, err := strconv.ParseInt(info["total_connections_received"], 10, 64)
				// Less the connections the harness opened, this one
				// included: only the backend's count.
				total.Add(c - n.dials.Load())
				return err
			})
			return total.Load(), err
		},
		Restart: restart,
	}
}

// pubSubClients returns the ids of the node's pub/sub connections, less
// those of Sentinel, which subscribes to every server it watches.
func pubSubClients(ctx context.Context, n *Node) ([]string, error) {
	s, err := redis.String(n.Do(ctx, "CLIENT", "LIST", "TYPE", "pubsub"))
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, line := range strings.Split(s, "\n") {
		if strings.TrimSpace(line) == "" || strings.Contains(line, " name=sentinel-") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if id, ok := strings.CutPrefix(f, "id="); ok {
				ids = append(ids, id)
			}
		}
	}
	return ids, nil
}

// killPubSub closes the node's pub/sub connections, those of Sentinel
// excepted.
func killPubSub(ctx context.Context, n *Node) error {
	ids, err := pubSubClients(ctx, n)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := n.Do(ctx, "CLIENT", "KILL", "ID", id); err != nil && !strings.Contains(err.Error(), "No such client") {
			return err
		}
	}
	return nil
}

// killClients closes the node's normal client connections, those of
// Sentinel excepted.
func killClients(ctx context.Context, n *Node) error {
	s, err := redis.String(n.Do(ctx, "CLIENT", "LIST", "TYPE", "normal"))
	if err != nil {
		return err
	}
	for _, line := range strings.Split(s, "\n") {
		if strings.TrimSpace(line) == "" || strings.Contains(line, " name=sentinel-") {
			continue
		}
		for _, f := range strings.Fields(line) {
			id, ok := strings.CutPrefix(f, "id=")
			if !ok {
				continue
			}
			if _, err := n.Do(ctx, "CLIENT", "KILL", "ID", id); err != nil && !strings.Contains(err.Error(), "No such client") {
				return err
			}
		}
	}
	return nil
}
