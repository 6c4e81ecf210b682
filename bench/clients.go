package bench

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/gomodule/redigo/redis"
	goredis "github.com/redis/go-redis/v9"

	"github.com/dsyncgo/dsync/observe"
)

// counter counts what one client sends: every command, and the round
// trips among them (a command whose reply the caller waits for); and, for
// dsync's queued primitives, the hand-offs its releases made (see
// handOffObserver).
type counter struct {
	commands   atomic.Int64
	roundTrips atomic.Int64
	handOffs   atomic.Int64
}

// handOffObserver counts into c every hand-off that a release through the
// backend it is set on makes: observe reports a hand-off once, on the
// releasing side, whether the waiter is in this process (Local) or in
// another, so the counts of every contender's backend add up to the run's
// hand-offs. A hand-off that a newcomer's attempt makes to a head waiter
// that waited past the mutex's threshold (see mutex.WithHandoffAfter) is
// not reported by observe, and not counted.
func handOffObserver(c *counter) *observe.Observer {
	return &observe.Observer{HandedOff: func(observe.HandOff) { c.handOffs.Add(1) }}
}

// meter measures one run: the commands and round trips its clients send,
// and the calls the server executes meanwhile.
type meter struct {
	ad                          admin
	c                           *counter
	calls, cmds, rtts, handOffs int64
}

// startMeter takes the counts a run starts from.
func startMeter(ad admin, c *counter) (*meter, error) {
	calls, err := ad.serverCalls()
	if err != nil {
		return nil, err
	}
	return &meter{ad: ad, c: c, calls: calls, cmds: c.commands.Load(), rtts: c.roundTrips.Load(), handOffs: c.handOffs.Load()}, nil
}

// handOffsSince returns the hand-offs counted since startMeter.
func (m *meter) handOffsSince() int64 { return m.c.handOffs.Load() - m.handOffs }

// stop returns what the run cost since startMeter.
func (m *meter) stop() (commands, roundTrips, serverCalls int64, err error) {
	calls, err := m.ad.serverCalls()
	return m.c.commands.Load() - m.cmds, m.c.roundTrips.Load() - m.rtts, calls - m.calls, err
}

// redigoPool returns a pool whose connections count into c.
func redigoPool(addr string, c *counter) *redis.Pool {
	return &redis.Pool{
		MaxIdle:     64,
		IdleTimeout: time.Minute,
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			conn, err := redis.DialContext(ctx, "tcp", addr)
			if err != nil {
				return nil, err
			}
			return &countingConn{Conn: conn, c: c}, nil
		},
	}
}

// countingConn wraps a redigo connection; it keeps the context and timeout
// forms so that callers behave as on a plain connection.
type countingConn struct {
	redis.Conn
	c *counter
}

func (cc *countingConn) count(cmd string, roundTrip bool) {
	if cmd == "" {
		return
	}
	cc.c.commands.Add(1)
	if roundTrip {
		cc.c.roundTrips.Add(1)
	}
}

func (cc *countingConn) Do(cmd string, args ...any) (any, error) {
	cc.count(cmd, true)
	return cc.Conn.Do(cmd, args...)
}

func (cc *countingConn) DoContext(ctx context.Context, cmd string, args ...any) (any, error) {
	cc.count(cmd, true)
	return redis.DoContext(cc.Conn, ctx, cmd, args...)
}

func (cc *countingConn) DoWithTimeout(d time.Duration, cmd string, args ...any) (any, error) {
	cc.count(cmd, true)
	return redis.DoWithTimeout(cc.Conn, d, cmd, args...)
}

func (cc *countingConn) Send(cmd string, args ...any) error {
	cc.count(cmd, false) // of a batch or of pub/sub: Flush counts the round trip
	return cc.Conn.Send(cmd, args...)
}

// Flush ends a batch of Sends whose replies the sender reads next (the
// adapter's pipelined calls), or a pub/sub command: a round trip.
func (cc *countingConn) Flush() error {
	cc.c.roundTrips.Add(1)
	return cc.Conn.Flush()
}

func (cc *countingConn) ReceiveContext(ctx context.Context) (any, error) {
	return redis.ReceiveContext(cc.Conn, ctx)
}

func (cc *countingConn) ReceiveWithTimeout(d time.Duration) (any, error) {
	return redis.ReceiveWithTimeout(cc.Conn, d)
}

// goRedisClient returns a go-redis client whose commands count into c.
func goRedisClient(addr string, c *counter) *goredis.Client {
	// Contexts' deadlines bound calls on the socket, for every
	// implementation alike (see backend/goredis).
	cl := goredis.NewClient(&goredis.Options{Addr: addr, PoolSize: 16, ContextTimeoutEnabled: true})
	cl.AddHook(countingHook{c})
	return cl
}

type countingHook struct{ c *counter }

func (h countingHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h countingHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		h.c.commands.Add(1)
		h.c.roundTrips.Add(1)
		return next(ctx, cmd)
	}
}

func (h countingHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		h.c.commands.Add(int64(len(cmds)))
		h.c.roundTrips.Add(1)
		return next(ctx, cmds)
	}
}
