package bench

import (
	"math"
	"time"
)

// The waiting-time model of the contended targets without a critical
// section (see "A model for the contended no-hold targets" in README.md).
//
// N contenders each lock, unlock and lock again at once, so that every
// one of them is always either waiting for the lock or holding it (its
// unlock's round trip included), and one holds at a time. Over a run of
// length D the contenders' time adds up to N·D: the waits, and R·D holds
// of mean length h for a rate R. Holds do not overlap, so R·h ≤ 1, and
// the waits add up to N·D − R·D·h ≥ (N−1)·D. There are R·D of them, so
// the mean wait is at least (N−1)/R (Little's law with N−1 waiting).
//
// A run whose p99 wait is at most a and whose max wait is at most M has a
// mean wait of at most 0.99·a + 0.01·M: 99% of the waits are at most a,
// the rest at most M. Both hold only if (N−1)/R ≤ 0.99·a + 0.01·M, so
//
//	R ≥ (N−1) / (0.99·a + 0.01·M)
//
// is the least rate at which a p99 of a and a max of M can be met at all.
// Where it is above what the machine can do, the targets contradict each
// other there.

// RequiredRate returns the least acquisitions per second at which
// contenders that always want the lock can have a p99 wait of at most p99
// and a max wait of at most maxWait (see above). It is 0 for fewer than
// two contenders, who never wait for each other, and +Inf when both
// bounds are 0.
func RequiredRate(contenders int, p99, maxWait time.Duration) float64 {
	if contenders < 2 {
		return 0
	}
	meanBound := 0.99*p99.Seconds() + 0.01*maxWait.Seconds()
	if meanBound <= 0 {
		return math.Inf(1)
	}
	return float64(contenders-1) / meanBound
}

// SerialCeiling returns the most acquisitions per second that one lock can
// pass between holders without a critical section when each acquisition
// after a release costs at least two round trips of rtt one after the
// other: the release, and then the next acquisition (even when the
// releasing process takes the lock straight back). It is 0 for a rtt of 0.
func SerialCeiling(rtt time.Duration) float64 {
	if rtt <= 0 {
		return 0
	}
	return 1 / (2 * rtt.Seconds())
}

// The rate ceiling of the contended targets with a critical section (see
// "What the 1 ms-hold rate line needs" in README.md).
//
// With holds, a lock passes either to a waiter of another process, by a
// hand-off whose cycle (hold, release and the waiter's wake-up) is h, or
// back to the releaser's own next acquisition, a relock whose cycle is r:
// what redsync's running process does at every release. A waiter is
// served only by a hand-off. If N−1 contenders always wait and each waits
// at most P for its turn, hand-offs must come at least (N−1)/P times a
// second (Little's law for the waiters). With a share f of the
// acquisitions handed over at a rate R, f·R ≥ (N−1)/P, and the cycles fill
// the time: R·((1−f)·r + f·h) = 1. Where a hand-off costs more than a
// relock, the fewest hand-offs give the most acquisitions, so
//
//	R·r ≤ 1 − (N−1)·(h − r)/P
//
// and the lock reaches at most that share of the relocking rate 1/r. It
// reaches 1 only with hand-offs no dearer than relocks.

// HoldRateCeiling returns the most acquisitions per second, as a multiple
// of 1/relock, that contenders who always want the lock can reach when a
// hand-off between them costs a cycle of handoff, a relock by the
// releaser a cycle of relock, and no wait may exceed p99 (see above). It
// is 0 where even handing over at every release is too slow for the bound
// (p99 < (N−1)·handoff), relock/handoff where a hand-off costs no more than
// a relock (hand over at every release), and +Inf for fewer than two
// contenders, who never wait for each other, or a relock of 0.
func HoldRateCeiling(contenders int, relock, handoff, p99 time.Duration) float64 {
	if contenders < 2 || relock <= 0 {
		return math.Inf(1)
	}
	waiting := float64(contenders - 1)
	if p99.Seconds() < waiting*handoff.Seconds() {
		return 0
	}
	if handoff <= relock {
		return relock.Seconds() / handoff.Seconds()
	}
	return 1 - waiting*(handoff-relock).Seconds()/p99.Seconds()
}
