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

// Ring measures hand-offs between processes on this machine and server
// with no lock at all: members, each in a process of its own (goroutines
// of this one when spawn is nil), pass a token around a ring for
// duration, each holding it for hold and then handing it to the next with
// a script that PUBLISHes to that member's channel. That is one round trip
// and one pub/sub delivery per hand-off, with no queue, no registration,
// no expiry and no bookkeeping in the client. A lock that hands the mutex
// to a waiter in another process costs at least that per acquisition, so
// at the same hold its acquisitions per second stay below the ring's
// hand-offs per second. A lock whose releasing client takes it straight
// back, or one that hands over within a process, is not bound by it.
func Ring(ctx context.Context, addr string, members int, hold, duration time.Duration, spawn Spawn) (float64, error) {
	counts, err := ring(ctx, addr, members, hold, duration, spawn)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, c := range counts {
		n += c
	}
	return float64(n) / duration.Seconds(), nil
}

// ring runs a ring and returns how many times each member held the token.
func ring(ctx context.Context, addr string, members int, hold, duration time.Duration, spawn Spawn) ([]int64, error) {
	if members < 2 || duration <= 0 {
		return nil, fmt.Errorf("ring: %d members for %v; want at least 2, for a while", members, duration)
	}
	ringName := name("ring")
	starter, err := redis.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer starter.Close()
	if spawn == nil {
		return ringInProcess(ctx, addr, ringName, members, hold, duration, starter)
	}
	workers, err := startCrew(spawn, members, func(i int) job {
		return job{Ring: true, Index: i, Members: members, Addr: addr, Name: ringName, Hold: hold}
	})
	if err != nil {
		return nil, err
	}
	defer workers.close()
	// One deadline for all: a member that held on past the others' end
	// would pass the token to one that had left.
	if err := workers.begin(begin{Deadline: time.Now().Add(duration)}); err != nil {
		return nil, err
	}
	if err := startRing(starter, ringName); err != nil {
		return nil, err
	}
	rs, err := workers.reports()
	if err != nil {
		return nil, err
	}
	counts := make([]int64, members)
	for i, r := range rs {
		counts[i] = r.Acquired
	}
	return counts, nil
}

func ringInProcess(ctx context.Context, addr, ringName string, members int, hold, duration time.Duration, starter redis.Conn) ([]int64, error) {
	ms := make([]*ringMember, 0, members)
	defer func() {
		for _, m := range ms {
			m.close()
		}
	}()
	for i := range members {
		m, err := joinRing(ctx, addr, ringName, i, members)
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	counts := make([]int64, members)
	errs := make([]error, members)
	done := make(chan struct{}, members)
	deadline := time.Now().Add(duration)
	for i, m := range ms {
		go func() {
			counts[i], errs[i] = m.run(hold, deadline)
			done <- struct{}{}
		}()
	}
	// Without the token the members wait out the run and a second.
	err := startRing(starter, ringName)
	for range ms {
		<-done
	}
	return counts, errors.Join(append(errs, err)...)
}

// startRing gives the token to member 0.
func startRing(c redis.Conn, ringName string) error {
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
		// After the deadline the token still has to finish the hold it
		// is in and go round once more; a second covers the trip.
		wait := max(time.Until(deadline), 0) + hold + time.Second
		switch v := psc.ReceiveWithTimeout(wait).(type) {
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
