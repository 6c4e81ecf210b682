package bench

import (
	"container/heap"
	"math/rand/v2"
	"time"
)

// RWModelInput is a read-write workload and what the machine measured.
type RWModelInput struct {
	Contenders    int           // each cycling lock, hold, unlock
	Hold          time.Duration // of every hold
	ReadShare     float64       // of the cycles that read, chosen at random per cycle
	PreferReaders bool          // rwlock.WithReaderPreference; else writers are preferred

	// MutexRate is the dsync mutex's acquisitions/s measured with
	// Contenders and Hold, every cycle exclusive; ReadRate the rwlock's
	// with every cycle a read. A ReadRate of 0 means not measured.
	MutexRate float64
	ReadRate  float64

	// Spread draws each leg and wake-up uniformly from its mean·(1±Spread),
	// at most 1; with 0 they are constant.
	Spread float64

	Seed uint64 // of the draws: read or write, and of the spread
}

// RWModelResult is the model's rate and its calibration.
type RWModelResult struct {
	Rate float64       // acquisitions/s
	Leg  time.Duration // one way between a contender and the server
	Wake time.Duration // from a hand-off at the server to the waiter's hold
}

// The model runs this many acquisitions, after rwModelWarmUp more.
const (
	rwModelAcquisitions = 200_000
	rwModelWarmUp       = 2_000
)

// RWCeiling returns the acquisitions/s that the rwlock's policy allows on
// in's workload, on a machine that measured in's two rates: a
// deterministic discrete-event model of the policy of package rwlock,
// run for 200,000 acquisitions after a warm-up.
//
// In the model, a contender sends each acquisition and each release to
// the server, which decides at once; a message takes Leg each way. The
// server grants a read while no write is held and, with writer
// preference, no writer is queued; a write while nothing is held and no
// writer is queued; else the contender waits. A waiting writer is queued
// in arrival order and keeps new readers out unless readers are
// preferred. The release of a write hands the lock to every waiting
// reader at once, or if none waits to the head writer; the last read
// release hands it to the head writer. A waiter handed the lock learns it
// Wake later. A cycle that finds the lock free thus costs the hold and
// four legs; the lock passes from one hold to a waiter's in a leg and a
// wake-up.
//
// Leg and Wake are calibrated so that the model reproduces the two
// measured rates: readers alone never wait, so ReadRate gives
// Hold+4·Leg = Contenders/ReadRate; the mutex has a waiter at every
// release (as it does in the model for 2 or more contenders whenever
// MutexRate < ReadRate), so MutexRate gives Hold+Leg+Wake = 1/MutexRate.
// Without ReadRate, Leg is taken equal to Wake, both calibrated on
// MutexRate. A calibration below zero is taken as zero, and the model is
// then faster than the machine.
//
// With Spread 0, legs and wake-ups are constant: the highest rate of the
// writer-preferring policy, but contenders then move in step, and whether
// readers ever all leave the lock at once, which a queued writer waits
// for when readers are preferred, turns on the calibration's last
// microsecond. Use a Spread of 0.25 or more with PreferReaders. The
// spread keeps the calibration, which holds for the means.
//
// Not modelled: the queueing for the server and the CPUs, which the
// measured rates include at their own mix but which the model keeps
// constant (a batch hand-off wakes many processes at once for the cost of
// one wake-up); the write side's costs beyond the mutex's; the spread of
// the hold; missed wake-ups, heartbeats, leases and re-entry. The model
// is therefore a ceiling, not a prediction.
//
// Rate is 0 if Contenders is below 1, Hold is negative or MutexRate is
// not positive.
func RWCeiling(in RWModelInput) RWModelResult {
	if in.Contenders < 1 || in.Hold < 0 || in.MutexRate <= 0 {
		return RWModelResult{}
	}
	h := in.Hold.Seconds()
	var leg, wake float64
	if in.ReadRate > 0 {
		leg = max(0, (float64(in.Contenders)/in.ReadRate-h)/4)
		wake = max(0, 1/in.MutexRate-h-leg)
	} else {
		leg = max(0, (1/in.MutexRate-h)/2)
		wake = leg
	}
	s := &rwSim{in: in, leg: leg, wake: wake, spread: min(max(in.Spread, 0), 1),
		rng:   rand.New(rand.NewPCG(in.Seed, 0)),
		write: make([]bool, in.Contenders)}
	for c := range in.Contenders {
		s.next(0, c)
	}
	var from, to float64 // the times of the first and last acquisition counted
	for s.acquired < rwModelWarmUp+rwModelAcquisitions {
		e := heap.Pop(&s.events).(rwEvent)
		switch e.kind {
		case rwAcquire:
			s.acquire(e.at, e.who)
		case rwHold:
			s.acquired++
			if s.acquired == rwModelWarmUp {
				from = e.at
			}
			to = e.at
			s.at(e.at+h+s.draw(leg), rwRelease, e.who)
		case rwRelease:
			s.release(e.at, e.who)
			s.next(e.at+s.draw(leg), e.who)
		}
	}
	return RWModelResult{
		Rate: rwModelAcquisitions / (to - from),
		Leg:  time.Duration(leg * 1e9),
		Wake: time.Duration(wake * 1e9),
	}
}

// rwSim is the state of one run of the model, times in seconds.
type rwSim struct {
	in               RWModelInput
	leg, wake        float64 // means
	spread           float64
	rng              *rand.Rand
	events           rwEvents
	seq              uint64 // events scheduled, to order events at one time
	acquired         int
	write            []bool // by contender: whether its cycle writes
	writer           bool   // a write hold is granted
	readers          int    // read holds granted
	writers, waiting []int  // queued writers, in order; waiting readers
}

// next starts contender c's next cycle: its acquisition reaches the server
// at.
func (s *rwSim) next(at float64, c int) {
	s.write[c] = s.rng.Float64() >= s.in.ReadShare
	s.at(at+s.draw(s.leg), rwAcquire, c)
}

// acquire is contender c's acquisition reaching the server.
func (s *rwSim) acquire(t float64, c int) {
	switch {
	case s.write[c] && !s.writer && s.readers == 0 && len(s.writers) == 0:
		s.writer = true
	case s.write[c]:
		s.writers = append(s.writers, c)
		return
	case !s.writer && (s.in.PreferReaders || len(s.writers) == 0):
		s.readers++
	default:
		s.waiting = append(s.waiting, c)
		return
	}
	s.at(t+s.draw(s.leg), rwHold, c)
}

// release is contender c's release reaching the server.
func (s *rwSim) release(t float64, c int) {
	if s.write[c] {
		s.writer = false
		s.passOn(t, true)
		return
	}
	if s.readers--; s.readers == 0 && !s.writer {
		s.passOn(t, false)
	}
}

// passOn hands the lock, whose write hold is free, on as pass_on in
// rwlock/lua/rw.lua does: to every waiting reader after a write, or if no
// writer is queued, or if readers are preferred; else, once no read is
// held, to the head writer.
func (s *rwSim) passOn(t float64, afterWrite bool) {
	if len(s.waiting) > 0 && (afterWrite || len(s.writers) == 0 || s.in.PreferReaders) {
		for _, c := range s.waiting {
			s.readers++
			s.at(t+s.draw(s.wake), rwHold, c)
		}
		s.waiting = s.waiting[:0]
		return
	}
	if len(s.writers) > 0 && s.readers == 0 {
		s.writer = true
		s.at(t+s.draw(s.wake), rwHold, s.writers[0])
		s.writers = s.writers[1:]
	}
}

// draw returns a leg or wake-up of the given mean.
func (s *rwSim) draw(mean float64) float64 {
	if s.spread == 0 {
		return mean
	}
	return mean * (1 + s.spread*(2*s.rng.Float64()-1))
}

// at schedules an event.
func (s *rwSim) at(t float64, kind rwKind, c int) {
	s.seq++
	heap.Push(&s.events, rwEvent{at: t, seq: s.seq, kind: kind, who: c})
}

type rwKind int

const (
	rwAcquire rwKind = iota // reaches the server
	rwHold                  // starts
	rwRelease               // reaches the server
)

type rwEvent struct {
	at   float64
	seq  uint64
	kind rwKind
	who  int
}

// rwEvents is a heap of events, earliest first, in the order scheduled
// at equal times.
type rwEvents []rwEvent

func (h rwEvents) Len() int { return len(h) }
func (h rwEvents) Less(i, j int) bool {
	return h[i].at < h[j].at || h[i].at == h[j].at && h[i].seq < h[j].seq
}
func (h rwEvents) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *rwEvents) Push(x any)   { *h = append(*h, x.(rwEvent)) }
func (h *rwEvents) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
