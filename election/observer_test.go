package election_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/observe"
)

// recorder records what an observer hears, one line per event.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf(format, args...))
}

func (r *recorder) has(e string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range r.events {
		if x == e {
			return true
		}
	}
	return false
}

func (r *recorder) observer() *observe.Observer {
	return &observe.Observer{
		Acquire: func(ctx context.Context, a observe.Acquisition) (context.Context, func(observe.AcquireResult)) {
			r.add("start %s %s try=%v", a.Primitive, a.Name, a.Try)
			return ctx, func(res observe.AcquireResult) { r.add("end %s %s %s", a.Primitive, a.Name, res.Outcome) }
		},
		HoldEnded: func(h observe.HoldEnd) { r.add("held %s %s lost=%v", h.Primitive, h.Name, h.Lost) },
		Waiting:   func(w observe.Waiters) { r.add("waiting %s %s %+d", w.Primitive, w.Name, w.Delta) },
	}
}

// WithObserver's hooks hear the election's campaigns, as "election"
// acquisitions, its candidates waiting, and its terms ending.
func TestObserverHearsCampaignsAndTerms(t *testing.T) {
	srv := testserver.Real(t)
	ctx := context.Background()
	var rec recorder
	e := election.New(srv.NewBackend(t), "observed", election.WithObserver(rec.observer()))
	term, err := e.Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := e.TryCampaign(ctx, "b"); ok || err != nil {
		t.Fatalf("TryCampaign while leading: %v, %v", ok, err)
	}
	got := make(chan error, 1)
	go func() {
		t2, err := e.Campaign(ctx, "c")
		if err == nil {
			err = t2.Resign(ctx)
		}
		got <- err
	}()
	for i := 0; !rec.has("waiting election observed +1"); i++ {
		if i > 5000 {
			t.Fatal("no candidate reported waiting within 5s")
		}
		time.Sleep(time.Millisecond)
	}
	if err := term.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"start election observed try=false", "end election observed acquired",
		"start election observed try=true", "end election observed busy",
		"waiting election observed -1", "held election observed lost=false",
	} {
		if !rec.has(want) {
			t.Errorf("the observer did not hear %q; it heard %q", want, rec.events)
		}
	}
}
