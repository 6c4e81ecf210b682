package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/gomodule/redigo/redis"
)

// ringPass hands the token on: one script call, one round trip, one PUBLISH.
var ringPass = redis.NewScript(0, `-- KEYS: none. ARGV: channel. Reply: receivers.
return redis.call('PUBLISH', ARGV[1], 't')`)

// Ring measures the ceiling of hand-offs between processes on this machine
// and server: members, each in a process of its own (goroutines of this
// one when spawn is nil), pass a token around a ring for duration, each
// holding it for hold and then handing it to the next with a script that
// PUBLISHes to that member's channel. There is no lock: no queue, no
// registration, no expiry, no bookkeeping in the client, one round trip
// and one pub/sub delivery per hand-off. A lock that hands over to a
// waiter in another process costs at least that per acquisition, so at
// the same hold its acquisitions per second stay below the ring's
// hand-offs per second.
func Ring(ctx context.Context, addr string, members int, hold, duration time.Duration, spawn Spawn) (float64, error) {
	if members < 2 || duration <= 0 {
		return 0, fmt.Errorf("ring: %d members for %v; want at least 2, for a while", members, duration)
	}
	ringName := name("ring")
	if spawn == nil {
		return ringInProcess(ctx, addr, ringName, members, hold, duration)
	}
	procs := make([]*proc, 0, members)
	defer func() {
		for _, p := range procs {
			p.close()
		}
	}()
	for i := range members {
		p, err := startProc(spawn, job{Ring: true, Index: i, Members: members, Addr: addr, Name: ringName, Hold: hold})
		if err != nil {
			return 0, err
		}
		procs = append(procs, p)
	}
	// One deadline for all: a member that held on past the others' end
	// would pass the token to one that had left.
	deadline := time.Now().Add(duration)
	for _, p := range procs {
		if err := p.enc.Encode(begin{Duration: duration, Deadline: deadline}); err != nil {
			return 0, fmt.Errorf("worker: %w", err)
		}
	}
	if err := startRing(ctx, addr, ringName); err != nil {
		return 0, err
	}
	counts := make([]int64, members)
	var errs error
	for i, p := range procs {
		var r workerReport
		if err := p.dec.Decode(&r); err != nil {
			return 0, fmt.Errorf("worker: %w", err)
		}
		if r.Err != "" {
			errs = errors.Join(errs, errors.New(r.Err))
		}
		counts[i] = r.Acquired
	}
	if errs != nil {
		return 0, errs
	}
	return rate(counts, duration), nil
}

func ringInProcess(ctx context.Context, addr, ringName string, members int, hold, duration time.Duration) (float64, error) {
	type result struct {
		n   int64
		err error
	}
	ms := make([]*ringMember, 0, members)
	defer func() {
		for _, m := range ms {
			m.close()
		}
	}()
	for i := range members {
		m, err := joinRing(ctx, addr, ringName, i, members)
		if err != nil {
			return 0, err
		}
		ms = append(ms, m)
	}
	done := make(chan result, members)
	deadline := time.Now().Add(duration)
	for _, m := range ms {
		go func() {
			n, err := m.run(hold, deadline)
			done <- result{n, err}
		}()
	}
	if err := startRing(ctx, addr, ringName); err != nil {
		return 0, err
	}
	counts := make([]int64, 0, members)
	var errs error
	for range ms {
		r := <-done
		errs = errors.Join(errs, r.err)
		counts = append(counts, r.n)
	}
	if errs != nil {
		return 0, errs
	}
	return rate(counts, duration), nil
}

func rate(counts []int64, duration time.Duration) float64 {
	var n int64
	for _, c := range counts {
		n += c
	}
	return float64(n) / duration.Seconds()
}

// startRing gives the token to member 0.
func startRing(ctx context.Context, addr, ringName string) error {
	c, err := redis.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	n, err := redis.Int(ringPass.Do(c, ringChannel(ringName, 0)))
	if err == nil && n != 1 {
		err = fmt.Errorf("ring: the token reached %d members, want 1", n)
	}
	return err
}

func ringChannel(ringName string, i int) string { return ringName + "/" + strconv.Itoa(i) }

// ringMember is one member of a ring, subscribed to its channel.
type ringMember struct {
	sub, conn redis.Conn
	next      string
}

func joinRing(ctx context.Context, addr, ringName string, i, members int) (*ringMember, error) {
	sub, err := redis.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	conn, err := redis.DialContext(ctx, "tcp", addr)
	if err != nil {
		sub.Close()
		return nil, err
	}
	m := &ringMember{sub: sub, conn: conn, next: ringChannel(ringName, (i+1)%members)}
	psc := redis.PubSubConn{Conn: sub}
	if err := psc.Subscribe(ringChannel(ringName, i)); err != nil {
		m.close()
		return nil, err
	}
	if _, ok := psc.Receive().(redis.Subscription); !ok {
		m.close()
		return nil, errors.New("ring: subscription not confirmed")
	}
	if err := ringPass.Load(conn); err != nil {
		m.close()
		return nil, err
	}
	return m, nil
}

// run passes the token on each time it arrives, after holding it for
// hold, until deadline; then it passes it on once more, so that the next
// member stops too, and returns how many times it held the token.
func (m *ringMember) run(hold time.Duration, deadline time.Time) (int64, error) {
	psc := redis.PubSubConn{Conn: m.sub}
	var held int64
	for {
		// A member waits at most for the rest of the run and a second.
		switch v := psc.ReceiveWithTimeout(time.Until(deadline) + time.Second).(type) {
		case redis.Message:
			if time.Now().After(deadline) {
				_, err := ringPass.Do(m.conn, m.next)
				return held, err
			}
			held++
			time.Sleep(hold)
			if _, err := ringPass.Do(m.conn, m.next); err != nil {
				return held, err
			}
		case error:
			return held, fmt.Errorf("ring: waiting for the token: %w", v)
		}
	}
}

func (m *ringMember) close() {
	m.sub.Close()
	m.conn.Close()
}
