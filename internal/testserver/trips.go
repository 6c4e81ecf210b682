package testserver

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/backend"
)

// pingScript is the round trip a TripMeter times.
var pingScript = backend.NewScript(`-- KEYS: none. ARGV: none. Reply: 1.
return 1`)

// tripTick is the pause between two round trips of a TripMeter.
const tripTick = 5 * time.Millisecond

// TripMeter times a round trip to the server every 5ms from a goroutine
// of the test's process, and the overrun of the pause between two: the
// longest shows how long the machine held up an exchange with the server,
// the test's process or the server waiting for a CPU. A latency bound
// checked from inside the process allows for that, and only for that: a
// path slow by itself (a wake-up missed, a heartbeat waited out) is slow
// beside round trips that are quick.
type TripMeter struct {
	quit  chan struct{}
	done  chan struct{}
	once  sync.Once
	worst atomic.Int64 // ns
}

// MeterTrips starts timing round trips through b until Stop, which the
// end of t calls if the test does not.
func MeterTrips(t testing.TB, b backend.Backend) *TripMeter {
	m := &TripMeter{quit: make(chan struct{}), done: make(chan struct{})}
	t.Cleanup(func() { m.Stop() })
	go func() {
		defer close(m.done)
		ctx := context.Background()
		for i := 0; i < 1000000; i++ {
			start := time.Now()
			if _, err := b.Eval(ctx, pingScript, nil); err != nil {
				return
			}
			m.note(time.Since(start))
			start = time.Now()
			select {
			case <-m.quit:
				return
			case <-time.After(tripTick):
			}
			m.note(time.Since(start) - tripTick)
		}
	}()
	return m
}

func (m *TripMeter) note(d time.Duration) {
	for {
		w := m.worst.Load()
		if int64(d) <= w || m.worst.CompareAndSwap(w, int64(d)) {
			return
		}
	}
}

// Longest returns the longest round trip, or overrun of a pause, so far.
func (m *TripMeter) Longest() time.Duration { return time.Duration(m.worst.Load()) }

// Stop ends the measure, once the round trip under way is back, and
// returns the longest.
func (m *TripMeter) Stop() time.Duration {
	m.once.Do(func() { close(m.quit) })
	<-m.done
	return m.Longest()
}
