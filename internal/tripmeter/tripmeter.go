// Package tripmeter times round trips to a server from inside a test's
// process, so that a latency bound checked there can allow for a loaded
// machine, and only for that.
package tripmeter

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/backend"
)

// Ping is the round trip a Meter times: the cheapest script.
var Ping = backend.NewScript(`-- KEYS: none. ARGV: none. Reply: 1.
return 1`)

// Tick is the pause between two round trips of a Meter. It keeps the
// meter from loading the machine it measures; a stall of the process
// during the pause shows as its overrun.
const Tick = 5 * time.Millisecond

// Meter times a round trip to the server every Tick from a goroutine of
// the test's process, and the overrun of the pause between two: the
// longest shows how long the machine held up an exchange with the server,
// the test's process or the server waiting for a CPU. A bound on an
// exchange with the server allows for that, and only for that: a path
// slow by itself (a wake-up missed, a heartbeat waited out) is slow beside
// round trips that are quick.
type Meter struct {
	quit    chan struct{}
	done    chan struct{}
	once    sync.Once
	worst   atomic.Int64 // ns
	stalled atomic.Int64 // ns, the sum of what each sample took past Quick
}

// Quick is what a round trip, or the overrun of a pause, may take on an
// idle machine: Stalled counts only the time past it.
const Quick = time.Millisecond

// Start times round trips through b until Stop, ctx's end or an error of
// b, whichever comes first; the end of t calls Stop if the test does not.
// With b nil it times only the overrun of the pauses: how long the machine
// held up the test's process, for a test whose server stalls on purpose.
func Start(t testing.TB, ctx context.Context, b backend.Backend) *Meter {
	m := &Meter{quit: make(chan struct{}), done: make(chan struct{})}
	t.Cleanup(func() { m.Stop() })
	go func() {
		defer close(m.done)
		for i := 0; i < 1000000; i++ {
			start := time.Now()
			if b != nil {
				if _, err := b.Eval(ctx, Ping, nil); err != nil {
					return
				}
				m.note(time.Since(start))
				start = time.Now()
			}
			select {
			case <-m.quit:
				return
			case <-time.After(Tick):
			}
			m.note(time.Since(start) - Tick)
		}
	}()
	return m
}

func (m *Meter) note(d time.Duration) {
	if d > Quick {
		m.stalled.Add(int64(d - Quick))
	}
	for {
		w := m.worst.Load()
		if int64(d) <= w || m.worst.CompareAndSwap(w, int64(d)) {
			return
		}
	}
}

// Longest returns the longest round trip, or overrun of a pause, so far.
func (m *Meter) Longest() time.Duration { return time.Duration(m.worst.Load()) }

// Stalled returns the sum, over the round trips and pauses so far, of
// what each took past Quick: how long in all the machine held up the
// meter. A path of several steps (a timer, a round trip, a wake-up), each
// of which a loaded machine may hold up in turn, may be late by as much,
// where Longest allows for one step.
func (m *Meter) Stalled() time.Duration { return time.Duration(m.stalled.Load()) }

// Stop ends the measure, once the round trip under way is back, and
// returns the longest.
func (m *Meter) Stop() time.Duration {
	m.once.Do(func() { close(m.quit) })
	<-m.done
	return m.Longest()
}
