// Package otel reports what dsync's primitives do through OpenTelemetry:
// metrics of acquisitions, holds, renewals, hand-offs, waiters and pub/sub
// interruptions, and a span around each acquisition. It implements the
// hooks of package observe:
//
//	observe.Set(b, otel.New())                        // every primitive on b
//	m := mutex.New(b, "orders:42", mutex.WithObserver(otel.New()))
//
// # Metrics
//
//	dsync.acquire.duration    histogram, s   an acquisition's wait, by
//	                                         dsync.primitive, dsync.outcome
//	                                         (acquired, busy, timeout,
//	                                         cancelled, error), dsync.try
//	dsync.hold.duration       histogram, s   how long holds were kept, by
//	                                         dsync.primitive, dsync.hold.end
//	                                         (released, lost)
//	dsync.hold.lost           counter        holds lost, by dsync.primitive,
//	                                         dsync.lost.reason
//	dsync.renewal.calls       counter        batched renewal calls, by
//	                                         dsync.renewal.outcome (ok, failed)
//	dsync.renewal.leases      counter        leases those calls carried
//	dsync.renewal.duration    histogram, s   their round trips
//	dsync.handoffs            counter        locks handed to a waiter by a
//	                                         release, by dsync.handoff.local
//	dsync.waiters             up-down        acquisitions of this process
//	                                         waiting, by dsync.primitive
//	dsync.pubsub.interruptions counter       subscriptions broken and made
//	                                         again, or gaps, by
//	                                         dsync.pubsub.event: gap (the
//	                                         adapter made its connection
//	                                         again, or a slow receiver
//	                                         dropped messages; what the
//	                                         redigo and go-redis adapters
//	                                         report), reconnect (a
//	                                         subscription failed and the
//	                                         core made it again)
//
// # Alerts
//
//	dsync.acquire.duration  p99 of acquired rising: contention (holds last
//	                        long, or too many contenders); a rate of
//	                        timeout or error: callers give up (a lock held
//	                        too long, or a server unreachable)
//	dsync.hold.duration     p99 near the lease: holders run close to
//	                        losing their hold
//	dsync.hold.lost         any: a holder was told to stop (fixed leases
//	                        too short, the server unreachable past the
//	                        lease, a failover or restart that lost it)
//	dsync.renewal.calls     a rate of failed: the watchdog cannot reach the
//	                        server; losses follow within a lease
//	dsync.renewal.duration  p99 above a third of the lease: renewals may
//	                        not arrive in time
//	dsync.waiters           growing: acquisitions pile up
//	dsync.pubsub.interruptions
//	                        a sustained rate: pub/sub connections keep
//	                        breaking, or receivers fall behind; waiters
//	                        try again, wake-ups may come late
//
// Lock names are not an attribute by default: a service that locks one
// name per order would make a metric series per order. WithNameAttribute
// adds dsync.name through a function that maps names to a bounded set
// (such as "orders:*"). Spans carry the name as is.
//
// # Spans
//
// Each acquisition is a span of the tracer provider's, a child of the
// caller's context: dsync.<primitive>.<op>, where op is lock, rlock (a
// read hold of an rwlock) or acquire (semaphore permits), with "try"
// before it for a single attempt (dsync.mutex.trylock). Its attributes
// are dsync.primitive, dsync.name, dsync.role and dsync.outcome; an
// outcome of error sets the span's status to Error.
package otel

import (
	"context"
	"errors"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/dsyncgo/dsync/observe"
)

// ScopeName is the instrumentation scope of the meter and tracer.
const ScopeName = "github.com/dsyncgo/dsync/otel"

// An Option configures New.
type Option func(*config)

type config struct {
	mp   metric.MeterProvider
	tp   trace.TracerProvider
	name func(string) string
}

// WithMeterProvider sets where metrics go; the default is the global
// provider (otel.GetMeterProvider).
func WithMeterProvider(mp metric.MeterProvider) Option { return func(c *config) { c.mp = mp } }

// WithTracerProvider sets where spans go; the default is the global
// provider (otel.GetTracerProvider).
func WithTracerProvider(tp trace.TracerProvider) Option { return func(c *config) { c.tp = tp } }

// WithNameAttribute adds the attribute dsync.name to the metrics of
// acquisitions, holds and waiters, with the value f returns for a lock's
// name; f must map the names in use to a bounded set, or the metric
// series grow with them. The default adds no name.
func WithNameAttribute(f func(name string) string) Option { return func(c *config) { c.name = f } }

type instruments struct {
	acquire    metric.Float64Histogram
	hold       metric.Float64Histogram
	lost       metric.Int64Counter
	renewals   metric.Int64Counter
	renewed    metric.Int64Counter
	renewalDur metric.Float64Histogram
	handoffs   metric.Int64Counter
	waiters    metric.Int64UpDownCounter
	pubsub     metric.Int64Counter
}

// New returns an observer that records through OpenTelemetry. An
// instrument that cannot be created is reported to otel.Handle, as
// OpenTelemetry reports its own errors, and records nothing.
func New(opts ...Option) *observe.Observer {
	c := config{mp: otel.GetMeterProvider(), tp: otel.GetTracerProvider()}
	for _, o := range opts {
		o(&c)
	}
	m := c.mp.Meter(ScopeName)
	var (
		in   instruments
		errs []error
	)
	add := func(err error) { errs = append(errs, err) }
	var err error
	in.acquire, err = m.Float64Histogram("dsync.acquire.duration", metric.WithUnit("s"),
		metric.WithDescription("How long acquisitions waited, by outcome."))
	add(err)
	in.hold, err = m.Float64Histogram("dsync.hold.duration", metric.WithUnit("s"),
		metric.WithDescription("How long holds were kept until released or lost."))
	add(err)
	in.lost, err = m.Int64Counter("dsync.hold.lost", metric.WithUnit("{hold}"),
		metric.WithDescription("Holds lost, by reason."))
	add(err)
	in.renewals, err = m.Int64Counter("dsync.renewal.calls", metric.WithUnit("{call}"),
		metric.WithDescription("Batched lease renewal calls, by outcome."))
	add(err)
	in.renewed, err = m.Int64Counter("dsync.renewal.leases", metric.WithUnit("{lease}"),
		metric.WithDescription("Leases sent in batched renewal calls, by outcome."))
	add(err)
	in.renewalDur, err = m.Float64Histogram("dsync.renewal.duration", metric.WithUnit("s"),
		metric.WithDescription("Round trips of batched lease renewal calls."))
	add(err)
	in.handoffs, err = m.Int64Counter("dsync.handoffs", metric.WithUnit("{handoff}"),
		metric.WithDescription("Locks handed to a waiter by a release."))
	add(err)
	in.waiters, err = m.Int64UpDownCounter("dsync.waiters", metric.WithUnit("{waiter}"),
		metric.WithDescription("Acquisitions of this process waiting."))
	add(err)
	in.pubsub, err = m.Int64Counter("dsync.pubsub.interruptions", metric.WithUnit("{event}"),
		metric.WithDescription("Pub/sub subscriptions broken and made again, or gaps: wake-ups may have been lost."))
	add(err)
	if err := errors.Join(errs...); err != nil {
		otel.Handle(err)
	}
	r := &recorder{in: in, name: c.name, tracer: c.tp.Tracer(ScopeName)}
	return &observe.Observer{
		Acquire:   r.acquire,
		HoldEnded: r.holdEnded,
		Renewed:   r.renewed,
		HandedOff: r.handedOff,
		Waiting:   r.waiting,
		PubSub:    r.pubsub,
	}
}

type recorder struct {
	in     instruments
	name   func(string) string
	tracer trace.Tracer
	sets   sync.Map // setKey -> metric.MeasurementOption
}

// setKey names a cached attribute set.
type setKey struct {
	metric string
	a, b   string
	name   string
}

// attrs returns the measurement option for the attributes of k, built
// once: most calls record one of a few sets.
func (r *recorder) attrs(k setKey, build func() []attribute.KeyValue) metric.MeasurementOption {
	if o, ok := r.sets.Load(k); ok {
		return o.(metric.MeasurementOption)
	}
	kv := build()
	if k.name != "" {
		kv = append(kv, attribute.String("dsync.name", k.name))
	}
	o := metric.WithAttributeSet(attribute.NewSet(kv...))
	r.sets.Store(k, o)
	return o
}

func (r *recorder) nameOf(name string) string {
	if r.name == nil {
		return ""
	}
	return r.name(name)
}

func (r *recorder) acquire(ctx context.Context, a observe.Acquisition) (context.Context, func(observe.AcquireResult)) {
	op := "lock"
	switch a.Role {
	case "r":
		op = "rlock"
	case "p":
		op = "acquire"
	}
	if a.Try {
		op = "try" + op
	}
	ctx, span := r.tracer.Start(ctx, "dsync."+a.Primitive+"."+op, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("dsync.primitive", a.Primitive), attribute.String("dsync.name", a.Name),
			attribute.String("dsync.role", a.Role)))
	name := r.nameOf(a.Name)
	return ctx, func(res observe.AcquireResult) {
		try := "false"
		if a.Try {
			try = "true"
		}
		r.in.acquire.Record(context.Background(), res.Wait.Seconds(),
			r.attrs(setKey{"acquire", a.Primitive, string(res.Outcome) + "/" + try, name}, func() []attribute.KeyValue {
				return []attribute.KeyValue{attribute.String("dsync.primitive", a.Primitive),
					attribute.String("dsync.outcome", string(res.Outcome)), attribute.Bool("dsync.try", a.Try)}
			}))
		span.SetAttributes(attribute.String("dsync.outcome", string(res.Outcome)))
		if res.Outcome == observe.Failed {
			span.RecordError(res.Err)
			span.SetStatus(codes.Error, res.Err.Error())
		}
		span.End()
	}
}

func (r *recorder) holdEnded(h observe.HoldEnd) {
	end := "released"
	if h.Lost {
		end = "lost"
	}
	name := r.nameOf(h.Name)
	r.in.hold.Record(context.Background(), h.Held.Seconds(),
		r.attrs(setKey{"hold", h.Primitive, end, name}, func() []attribute.KeyValue {
			return []attribute.KeyValue{attribute.String("dsync.primitive", h.Primitive), attribute.String("dsync.hold.end", end)}
		}))
	if h.Lost {
		r.in.lost.Add(context.Background(), 1,
			r.attrs(setKey{"lost", h.Primitive, h.Reason, name}, func() []attribute.KeyValue {
				return []attribute.KeyValue{attribute.String("dsync.primitive", h.Primitive), attribute.String("dsync.lost.reason", h.Reason)}
			}))
	}
}

func (r *recorder) renewed(rn observe.Renewal) {
	outcome := "ok"
	if rn.Failed {
		outcome = "failed"
	}
	opt := r.attrs(setKey{metric: "renewal", a: outcome}, func() []attribute.KeyValue {
		return []attribute.KeyValue{attribute.String("dsync.renewal.outcome", outcome)}
	})
	r.in.renewals.Add(context.Background(), 1, opt)
	r.in.renewed.Add(context.Background(), int64(rn.Leases), opt)
	r.in.renewalDur.Record(context.Background(), rn.Took.Seconds(), opt)
}

func (r *recorder) handedOff(h observe.HandOff) {
	local := "false"
	if h.Local {
		local = "true"
	}
	r.in.handoffs.Add(context.Background(), 1, r.attrs(setKey{metric: "handoff", a: local}, func() []attribute.KeyValue {
		return []attribute.KeyValue{attribute.Bool("dsync.handoff.local", h.Local)}
	}))
}

func (r *recorder) waiting(w observe.Waiters) {
	name := r.nameOf(w.Name)
	r.in.waiters.Add(context.Background(), int64(w.Delta), r.attrs(setKey{"waiters", w.Primitive, "", name}, func() []attribute.KeyValue {
		return []attribute.KeyValue{attribute.String("dsync.primitive", w.Primitive)}
	}))
}

func (r *recorder) pubsub(e observe.PubSubEvent) {
	event := "gap"
	if e.Reconnect {
		event = "reconnect"
	}
	r.in.pubsub.Add(context.Background(), 1, r.attrs(setKey{metric: "pubsub", a: event}, func() []attribute.KeyValue {
		return []attribute.KeyValue{attribute.String("dsync.pubsub.event", event)}
	}))
}
