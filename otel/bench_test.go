package otel_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/observe"
	dotel "github.com/dsyncgo/dsync/otel"
)

// BenchmarkUncontended measures an uncontended lock+unlock on a real
// server with no observer, with an observer whose hooks do nothing, and
// with this package's observer recording into an in-memory reader.
func BenchmarkUncontended(b *testing.B) {
	srv := testserver.Real(b)
	nop := &observe.Observer{
		Acquire: func(ctx context.Context, a observe.Acquisition) (context.Context, func(observe.AcquireResult)) {
			return ctx, func(observe.AcquireResult) {}
		},
		HoldEnded: func(observe.HoldEnd) {},
		Renewed:   func(observe.Renewal) {},
		HandedOff: func(observe.HandOff) {},
		Waiting:   func(observe.Waiters) {},
		PubSub:    func(observe.PubSubEvent) {},
	}
	withOtel := benchObserver()
	for _, c := range []struct {
		name string
		obs  *observe.Observer
	}{{"unset", nil}, {"nop", nop}, {"otel", withOtel}} {
		b.Run(c.name, func(b *testing.B) {
			be := srv.NewBackend(b)
			m := mutex.New(be, "bench:observe", mutex.WithObserver(c.obs))
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := m.LockContext(ctx); err != nil {
					b.Fatal(err)
				}
				m.Unlock()
			}
		})
	}
}

// BenchmarkHookCost measures what the hooks of one uncontended
// lock+unlock cost the caller, without I/O: the observer lookup, the
// acquisition's start and end, and the end of the hold.
func BenchmarkHookCost(b *testing.B) {
	withOtel := benchObserver()
	nop := &observe.Observer{
		Acquire: func(ctx context.Context, a observe.Acquisition) (context.Context, func(observe.AcquireResult)) {
			return ctx, func(observe.AcquireResult) {}
		},
		HoldEnded: func(observe.HoldEnd) {},
	}
	backend := new(int)
	for _, c := range []struct {
		name string
		obs  *observe.Observer
	}{{"unset", nil}, {"nop", nop}, {"otel", withOtel}} {
		b.Run(c.name, func(b *testing.B) {
			observe.Set(backend, c.obs)
			defer observe.Set(backend, nil)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				o := observe.For(backend)
				if o == nil {
					continue
				}
				_, done := o.StartAcquire(ctx, observe.Acquisition{Primitive: "mutex", Name: "bench", Role: "x"})
				done(observe.AcquireResult{Outcome: observe.Acquired})
				o.ReportHoldEnded(observe.HoldEnd{Primitive: "mutex", Name: "bench", Role: "x"})
			}
		})
	}
}

// benchObserver records metrics into an in-memory reader and makes spans
// that a sampler keeps but no processor retains, as a service exporting
// them in batches would.
func benchObserver() *observe.Observer {
	return dotel.New(dotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))),
		dotel.WithTracerProvider(sdktrace.NewTracerProvider()))
}
