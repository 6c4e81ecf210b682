package otel_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/fairlock"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/mutex"
	"github.com/dsyncgo/dsync/observe"
	dotel "github.com/dsyncgo/dsync/otel"
	"github.com/dsyncgo/dsync/rwlock"
	"github.com/dsyncgo/dsync/semaphore"
)

func TestMain(m *testing.M) { testserver.Main(m) }

// setup returns an observer recording into an in-memory reader and span
// recorder.
func setup(opts ...dotel.Option) (*observe.Observer, *sdkmetric.ManualReader, *tracetest.SpanRecorder) {
	reader := sdkmetric.NewManualReader()
	spans := tracetest.NewSpanRecorder()
	opts = append(opts, dotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))),
		dotel.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))))
	return dotel.New(opts...), reader, spans
}

func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

func attr(set attribute.Set, key string) string {
	v, _ := set.Value(attribute.Key(key))
	return v.String()
}

// A scripted scenario, on a real server: one wait of known length (a
// holder releases 300ms after the waiter began), one hold lost because its
// key was deleted, one acquisition that times out. The recorded metrics
// and spans say exactly that.
func TestScenario(t *testing.T) {
	srv := testserver.Real(t)
	b := srv.NewBackend(t)
	obs, reader, spans := setup()
	observe.Set(b, obs)
	defer observe.Set(b, nil)
	ctx := context.Background()

	// One wait of about 300ms.
	holder := mutex.New(b, "otel:wait")
	waiter := mutex.New(b, "otel:wait")
	hctx := dsync.WithOwner(ctx)
	if err := holder.LockContext(hctx); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		holder.UnlockContext(hctx)
	}()
	wctx := dsync.WithOwner(ctx)
	if err := waiter.LockContext(wctx); err != nil {
		t.Fatal(err)
	}
	waiter.UnlockContext(wctx)

	// One timeout.
	holder.LockContext(hctx)
	tctx, cancel := context.WithTimeout(dsync.WithOwner(ctx), 100*time.Millisecond)
	if err := waiter.LockContext(tctx); err == nil {
		t.Fatal("acquired a held mutex")
	}
	cancel()
	holder.UnlockContext(hctx)

	// One loss: the key deleted behind the holder's back.
	lost := mutex.New(b, "otel:lost", mutex.WithWatchdog(600*time.Millisecond), mutex.WithLogger(nil))
	lctx := dsync.WithOwner(ctx)
	if err := lost.LockContext(lctx); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Do(ctx, "DEL", "dsync:mutex:{otel:lost}"); err != nil {
		t.Fatal(err)
	}
	<-lost.Done(lctx)

	// The renewal call that found the hold gone is recorded once it has
	// been applied, just after Done closed.
	m := collect(t, reader)
	for i := 0; i < 200 && m["dsync.renewal.calls"] == nil; i++ {
		time.Sleep(5 * time.Millisecond)
		m = collect(t, reader)
	}
	acq, ok := m["dsync.acquire.duration"].(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("no dsync.acquire.duration: %v", m)
	}
	counts := map[string]uint64{}
	for _, dp := range acq.DataPoints {
		outcome := attr(dp.Attributes, "dsync.outcome")
		counts[outcome] += dp.Count
		if attr(dp.Attributes, "dsync.primitive") != "mutex" {
			t.Errorf("primitive %q", attr(dp.Attributes, "dsync.primitive"))
		}
		if outcome == "acquired" {
			// Three immediate acquisitions and the 300ms wait.
			if dp.Count != 4 || dp.Sum < 0.29 || dp.Sum > 0.5 {
				t.Errorf("acquired: %d acquisitions, %.3fs in all; want 4, with one wait of 0.3s", dp.Count, dp.Sum)
			}
			if max, ok := dp.Max.Value(); !ok || max < 0.29 || max > 0.45 {
				t.Errorf("acquired: longest wait %.3fs; want 0.3s", max)
			}
		}
		if outcome == "timeout" && (dp.Sum < 0.099 || dp.Sum > 0.7) {
			t.Errorf("timeout: waited %.3fs; want the 100ms deadline (and at most half a second more)", dp.Sum)
		}
	}
	if counts["acquired"] != 4 || counts["timeout"] != 1 || len(counts) != 2 {
		t.Errorf("acquisitions by outcome %v; want 4 acquired, 1 timeout", counts)
	}

	lostC, ok := m["dsync.hold.lost"].(metricdata.Sum[int64])
	if !ok || len(lostC.DataPoints) != 1 || lostC.DataPoints[0].Value != 1 ||
		attr(lostC.DataPoints[0].Attributes, "dsync.lost.reason") != "hold no longer on the server" {
		t.Errorf("dsync.hold.lost = %+v; want one loss, reason \"hold no longer on the server\"", m["dsync.hold.lost"])
	}
	holds, _ := m["dsync.hold.duration"].(metricdata.Histogram[float64])
	ends := map[string]uint64{}
	for _, dp := range holds.DataPoints {
		ends[attr(dp.Attributes, "dsync.hold.end")] += dp.Count
	}
	if ends["released"] != 3 || ends["lost"] != 1 {
		t.Errorf("holds ended %v; want 3 released, 1 lost", ends)
	}
	waiters, _ := m["dsync.waiters"].(metricdata.Sum[int64])
	if len(waiters.DataPoints) != 1 || waiters.DataPoints[0].Value != 0 {
		t.Errorf("dsync.waiters = %+v; want back to 0", waiters.DataPoints)
	}
	renewals, _ := m["dsync.renewal.calls"].(metricdata.Sum[int64])
	renewed, _ := m["dsync.renewal.leases"].(metricdata.Sum[int64])
	if len(renewals.DataPoints) == 0 || len(renewed.DataPoints) == 0 || renewed.DataPoints[0].Value < renewals.DataPoints[0].Value {
		t.Errorf("renewals: calls %+v, leases %+v; want some, each call carrying a lease", renewals.DataPoints, renewed.DataPoints)
	}
	handoffs, _ := m["dsync.handoffs"].(metricdata.Sum[int64])
	var handed int64
	for _, dp := range handoffs.DataPoints {
		handed += dp.Value
	}
	if handed != 1 {
		t.Errorf("%d hand-offs; want 1 (to the waiter)", handed)
	}

	var names []string
	for _, s := range spans.Ended() {
		names = append(names, s.Name())
	}
	if len(names) != 5 || names[0] != "dsync.mutex.lock" {
		t.Errorf("spans %v; want 5 dsync.mutex.lock", names)
	}
}

// 10,000 lock names make a bounded number of metric series: one per
// outcome by default, and as many as the name function makes with
// WithNameAttribute.
func TestCardinality(t *testing.T) {
	srv := testserver.Real(t)
	b := srv.NewBackend(t)
	for _, c := range []struct {
		name   string
		opts   []dotel.Option
		series int
	}{
		{"default", nil, 1},
		{"WithNameAttribute", []dotel.Option{dotel.WithNameAttribute(func(n string) string {
			prefix, _, _ := strings.Cut(n, ":")
			return prefix + ":*"
		})}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			obs, reader, _ := setup(c.opts...)
			ctx := context.Background()
			for i := range 10000 {
				m := mutex.New(b, fmt.Sprintf("%s:%d", []string{"orders", "users"}[i%2], i), mutex.WithObserver(obs))
				if ok, err := m.TryLockContext(ctx); !ok || err != nil {
					t.Fatal(ok, err)
				}
				m.Unlock()
			}
			m := collect(t, reader)
			acq := m["dsync.acquire.duration"].(metricdata.Histogram[float64])
			holds := m["dsync.hold.duration"].(metricdata.Histogram[float64])
			var n uint64
			for _, dp := range acq.DataPoints {
				n += dp.Count
			}
			t.Logf("10,000 names: %d acquire series, %d hold series", len(acq.DataPoints), len(holds.DataPoints))
			if n != 10000 || len(acq.DataPoints) != c.series || len(holds.DataPoints) != c.series {
				t.Errorf("%d acquisitions in %d acquire series and %d hold series; want 10000 in %d each", n, len(acq.DataPoints), len(holds.DataPoints), c.series)
			}
		})
	}
}

// The reasons of losses other than a DEL, and pub/sub interruptions: a
// fixed lease that runs out, a ForceUnlock, and the pub/sub connection
// killed under a waiter (which the redigo adapter makes again itself,
// reporting a gap), each recorded with its attribute.
func TestLossReasonsAndReconnect(t *testing.T) {
	srv := testserver.Real(t)
	b := srv.NewBackend(t)
	obs, reader, _ := setup()
	reconnected := make(chan struct{}, 16)
	record := obs.PubSub
	obs.PubSub = func(e observe.PubSubEvent) {
		record(e)
		reconnected <- struct{}{}
	}
	observe.Set(b, obs)
	defer observe.Set(b, nil)
	ctx := context.Background()

	// A fixed lease of 150ms that runs out.
	fixed := mutex.New(b, "otel:fixed", mutex.WithLease(150*time.Millisecond), mutex.WithLogger(nil))
	fctx := dsync.WithOwner(ctx)
	if err := fixed.LockContext(fctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-fixed.Done(fctx):
	case <-time.After(5 * time.Second):
		t.Fatal("a 150ms lease not over after 5s")
	}

	// A hold taken by ForceUnlock.
	forced := mutex.New(b, "otel:forced", mutex.WithLogger(nil))
	xctx := dsync.WithOwner(ctx)
	if err := forced.LockContext(xctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := forced.ForceUnlock(ctx); !ok || err != nil {
		t.Fatal(ok, err)
	}
	<-forced.Done(xctx)

	// A waiter whose pub/sub connection is killed: the subscription is
	// made again, and the waiter still gets the mutex when it is freed.
	holder := mutex.New(b, "otel:pubsub")
	hctx := dsync.WithOwner(ctx)
	if err := holder.LockContext(hctx); err != nil {
		t.Fatal(err)
	}
	acquired := make(chan error, 1)
	wctx, cancel := context.WithTimeout(dsync.WithOwner(ctx), 20*time.Second)
	defer cancel()
	waiter := mutex.New(b, "otel:pubsub")
	go func() { acquired <- waiter.LockContext(wctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for n := 0; n == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the waiter did not subscribe within 5s")
		}
		time.Sleep(5 * time.Millisecond)
		var err error
		if n, err = srv.PubSubClients(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.KillPubSub(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reconnected:
	case <-time.After(10 * time.Second):
		t.Fatal("no interruption reported 10s after the pub/sub connection was killed")
	}
	holder.UnlockContext(hctx)
	if err := <-acquired; err != nil {
		t.Fatal(err)
	}
	if err := waiter.UnlockContext(wctx); err != nil {
		t.Fatal(err)
	}

	m := collect(t, reader)
	reasons := map[string]int64{}
	for _, dp := range m["dsync.hold.lost"].(metricdata.Sum[int64]).DataPoints {
		reasons[attr(dp.Attributes, "dsync.lost.reason")] += dp.Value
	}
	if reasons["lease expired"] != 1 || reasons["taken by ForceUnlock"] != 1 || len(reasons) != 2 {
		t.Errorf("losses by reason %v; want one \"lease expired\", one \"taken by ForceUnlock\"", reasons)
	}
	events := map[string]int64{}
	for _, dp := range m["dsync.pubsub.interruptions"].(metricdata.Sum[int64]).DataPoints {
		events[attr(dp.Attributes, "dsync.pubsub.event")] += dp.Value
	}
	if events["gap"] < 1 {
		t.Errorf("pub/sub interruptions %v; want a gap", events)
	}
}

// Every primitive reports through the backend's observer: an acquisition
// and a released hold each for fairlock, rwlock (read and write) and
// semaphore, by primitive.
func TestPrimitives(t *testing.T) {
	srv := testserver.Real(t)
	b := srv.NewBackend(t)
	obs, reader, spans := setup()
	observe.Set(b, obs)
	defer observe.Set(b, nil)
	ctx := dsync.WithOwner(context.Background())

	fl := fairlock.New(b, "otel:fair")
	if err := fl.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	if err := fl.UnlockContext(ctx); err != nil {
		t.Fatal(err)
	}
	rw := rwlock.New(b, "otel:rw")
	if err := rw.RLockContext(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rw.RUnlockContext(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rw.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rw.UnlockContext(ctx); err != nil {
		t.Fatal(err)
	}
	sem := semaphore.New(b, "otel:sem", 3)
	if err := sem.Acquire(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := sem.Release(ctx, 2); err != nil {
		t.Fatal(err)
	}

	m := collect(t, reader)
	want := map[string]uint64{"fairlock": 1, "rwlock": 2, "semaphore": 1}
	for _, metric := range []string{"dsync.acquire.duration", "dsync.hold.duration"} {
		got := map[string]uint64{}
		for _, dp := range m[metric].(metricdata.Histogram[float64]).DataPoints {
			got[attr(dp.Attributes, "dsync.primitive")] += dp.Count
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s by primitive %v; want %v", metric, got, want)
		}
	}
	var names []string
	for _, s := range spans.Ended() {
		names = append(names, s.Name())
	}
	if fmt.Sprint(names) != "[dsync.fairlock.lock dsync.rwlock.rlock dsync.rwlock.lock dsync.semaphore.acquire]" {
		t.Errorf("spans %v", names)
	}
}

// A server that stops answering for longer than the lease: the watchdog's
// renewal calls fail, and the hold is lost, which the metrics count.
func TestRenewalFailure(t *testing.T) {
	srv := testserver.Real(t)
	b := srv.NewBackend(t)
	obs, reader, _ := setup()
	observe.Set(b, obs)
	defer observe.Set(b, nil)
	ctx := dsync.WithOwner(context.Background())

	m := mutex.New(b, "otel:renewal", mutex.WithWatchdog(300*time.Millisecond), mutex.WithLogger(nil))
	if err := m.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	paused := make(chan error, 1)
	go func() { paused <- srv.Pause(context.Background(), 1500*time.Millisecond) }()
	select {
	case <-m.Done(ctx):
	case <-time.After(10 * time.Second):
		t.Fatal("hold not lost 10s into a 1.5s pause of a 300ms lease")
	}
	if err := <-paused; err != nil {
		t.Fatal(err)
	}

	data := collect(t, reader)
	calls := map[string]int64{}
	for _, dp := range data["dsync.renewal.calls"].(metricdata.Sum[int64]).DataPoints {
		calls[attr(dp.Attributes, "dsync.renewal.outcome")] += dp.Value
	}
	if calls["failed"] < 1 {
		t.Errorf("renewal calls by outcome %v; want a failed one", calls)
	}
	reasons := map[string]int64{}
	for _, dp := range data["dsync.hold.lost"].(metricdata.Sum[int64]).DataPoints {
		reasons[attr(dp.Attributes, "dsync.lost.reason")] += dp.Value
	}
	if reasons["renewals failed until the lease ran out"] != 1 || len(reasons) != 1 {
		t.Errorf("losses by reason %v; want one \"renewals failed until the lease ran out\"", reasons)
	}
	t.Logf("renewal calls %v, losses %v", calls, reasons)
}
