package observe_test

import (
	"context"
	"errors"
	"testing"

	"go.uber.org/goleak"

	"github.com/dsyncgo/dsync/observe"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A nil observer, and one without hooks, report nothing and cost nothing
// to call.
func TestNilObserver(t *testing.T) {
	var o *observe.Observer
	ctx := context.Background()
	c, done := o.StartAcquire(ctx, observe.Acquisition{})
	if c != ctx || done == nil {
		t.Fatal("StartAcquire on nil")
	}
	done(observe.AcquireResult{})
	o.ReportHoldEnded(observe.HoldEnd{})
	o.ReportRenewed(observe.Renewal{})
	o.ReportHandedOff(observe.HandOff{})
	o.ReportWaiting(observe.Waiters{})
	o.ReportPubSub(observe.PubSubEvent{})
	(&observe.Observer{}).ReportHoldEnded(observe.HoldEnd{})
}

// Set and For keep one observer per backend; nil removes it.
func TestSetFor(t *testing.T) {
	b1, b2 := new(int), new(int)
	o := &observe.Observer{}
	observe.Set(b1, o)
	if observe.For(b1) != o || observe.For(b2) != nil {
		t.Fatal("For after Set")
	}
	observe.Set(b1, nil)
	if observe.For(b1) != nil {
		t.Fatal("For after Set(nil)")
	}
}

// A hook that panics is recovered, and its observer disabled: the caller
// goes on, and no hook of that observer runs again.
func TestPanickingHookDisabled(t *testing.T) {
	calls := 0
	o := &observe.Observer{
		HoldEnded: func(observe.HoldEnd) { calls++; panic("boom") },
		Renewed:   func(observe.Renewal) { calls++ },
	}
	o.ReportHoldEnded(observe.HoldEnd{})
	o.ReportRenewed(observe.Renewal{})
	o.ReportHoldEnded(observe.HoldEnd{})
	if calls != 1 {
		t.Errorf("%d hook calls after a panic; want the observer disabled after the first", calls)
	}
}

// OutcomeOf tells how an acquisition ended.
func TestOutcomeOf(t *testing.T) {
	bg := context.Background()
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	expired, cancel2 := context.WithTimeout(bg, 0)
	defer cancel2()
	<-expired.Done()
	for _, c := range []struct {
		ctx      context.Context
		acquired bool
		err      error
		want     observe.Outcome
	}{
		{bg, true, nil, observe.Acquired},
		{bg, false, nil, observe.Busy},
		{expired, false, context.DeadlineExceeded, observe.TimedOut},
		{cancelled, false, context.Canceled, observe.Cancelled},
		{bg, false, errors.New("boom"), observe.Failed},
	} {
		if got := observe.OutcomeOf(c.ctx, c.acquired, c.err); got != c.want {
			t.Errorf("OutcomeOf(%v, %v, %v) = %s; want %s", c.ctx.Err(), c.acquired, c.err, got, c.want)
		}
	}
}
