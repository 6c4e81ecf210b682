package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
)

// The cases of backend.SetPublisher, an optional extension: they skip on
// a backend that does not implement it. That the SET and the PUBLISH
// share one round trip is the Pipeline's to check (package backend's
// tests), or the adapter's own tests: the suite sees only what arrives.

func (s *suite) setPublisherRules() []rule {
	return []rule{
		{"SetNXPublishSetsAndPublishes", "SetNXPublish sets an absent key with its expiry as SetNX does and reports true; on a key that exists it reports false and changes nothing; either way a subscriber of the channel receives the message, after the SET ran", false, s.testSetNXPublish},
		{"SetNXPublishFailsUnsent", "SetNXPublish with a ttl of zero or less fails with an error matching dsync.ErrInvalidLease, one with an ended context with its error, and neither sets the key nor publishes", false, s.testSetNXPublishUnsent},
		{"SetNXPublishClosed", "SetNXPublish on a closed backend fails with ErrClosed", false, s.testSetNXPublishClosed},
	}
}

// setPublisher returns b as a backend.SetPublisher, or skips t.
func setPublisher(t *testing.T, b backend.Backend) backend.SetPublisher {
	t.Helper()
	sp, ok := b.(backend.SetPublisher)
	if !ok {
		t.Skipf("%T does not implement backend.SetPublisher (optional)", b)
	}
	return sp
}

// expectHint receives the next message of sub, which must be payload on
// channel, and returns the value key has by then.
func (s *suite) expectHint(t *testing.T, ctx context.Context, b backend.Backend, sub backend.Subscription, channel, payload, key string) any {
	t.Helper()
	m, err := receive(ctx, sub, s.bound(5*time.Second))
	must(t, err, "receive the message of SetNXPublish")
	if m.Gap || m.Channel != channel || m.Payload != payload {
		t.Fatalf("received %+v, want %q on %q", m, payload, channel)
	}
	v, _ := getTTL(t, ctx, b, key)
	return v
}

// setPublishing is what a case of SetNXPublish starts from.
type setPublishing struct {
	b  backend.Backend
	sp backend.SetPublisher // b, as the extension
	// tag is a hash tag that the key, the channel and any other key of the
	// case share: on a cluster one node serves them all, so that a
	// message's receipt follows the SET there.
	tag, key, channel string
	sub               backend.Subscription // of channel, through another backend
}

// newSetPublishing returns the start of a case of SetNXPublish, or skips
// t on a backend that does not implement it.
func (s *suite) newSetPublishing(t *testing.T, ctx context.Context) setPublishing {
	t.Helper()
	b := s.newBackend(t)
	f := setPublishing{b: b, sp: setPublisher(t, b), tag: "{" + prefix() + "}"}
	f.key, f.channel = f.tag+":set", f.tag+":ch"
	sub, err := s.newBackend(t).Subscribe(ctx, f.channel)
	must(t, err, "subscribe")
	t.Cleanup(func() { sub.Close() })
	f.sub = sub
	return f
}

func (s *suite) testSetNXPublish(t *testing.T, ctx context.Context) {
	f := s.newSetPublishing(t, ctx)
	b, sp, sub, p, key, channel := f.b, f.sp, f.sub, f.tag, f.key, f.channel

	ok, err := sp.SetNXPublish(ctx, key, "first", 90*time.Second, channel, "took")
	if !ok || err != nil {
		t.Fatalf("SetNXPublish of an absent key: %v, %v; want true", ok, err)
	}
	if v := s.expectHint(t, ctx, b, sub, channel, "took", key); v != "first" {
		t.Fatalf("when the message of SetNXPublish arrived, the key was %#v, want \"first\": the PUBLISH ran before the SET", v)
	}
	v, ttl := getTTL(t, ctx, b, key)
	if v != "first" || ttl <= 80_000 || ttl > 90_000 {
		t.Fatalf("after SetNXPublish(%q, 90s): value %#v, PTTL %dms; want \"first\", 80000 < PTTL <= 90000", key, v, ttl)
	}

	ok, err = sp.SetNXPublish(ctx, key, "second", time.Hour, channel, "lost")
	if ok || err != nil {
		t.Fatalf("SetNXPublish of a key that exists: %v, %v; want false", ok, err)
	}
	s.expectHint(t, ctx, b, sub, channel, "lost", key)
	if v, ttl2 := getTTL(t, ctx, b, key); v != "first" || ttl2 > ttl {
		t.Fatalf("a SetNXPublish that reported false changed the key: value %#v, PTTL %dms (was %dms)", v, ttl2, ttl)
	}

	// A ttl under a millisecond is rounded up, never down to none.
	short := p + ":short"
	if ok, err := sp.SetNXPublish(ctx, short, "x", 1500*time.Microsecond, channel, "short"); !ok || err != nil {
		t.Fatalf("SetNXPublish with a ttl of 1.5ms: %v, %v; want true", ok, err)
	}
	s.expectHint(t, ctx, b, sub, channel, "short", short)
	if v, ttl := getTTL(t, ctx, b, short); v != nil && (ttl < 0 || ttl > 2) {
		t.Fatalf("after SetNXPublish with a ttl of 1.5ms: value %#v, PTTL %dms; want an expiry of 2ms at most", v, ttl)
	}
}

func (s *suite) testSetNXPublishUnsent(t *testing.T, ctx context.Context) {
	f := s.newSetPublishing(t, ctx)
	b, sp, sub, p, key, channel := f.b, f.sp, f.sub, f.tag, f.key, f.channel
	for _, ttl := range []time.Duration{0, -time.Second} {
		ok, err := sp.SetNXPublish(ctx, key, "x", ttl, channel, "invalid")
		if ok || !errors.Is(err, dsync.ErrInvalidLease) {
			t.Errorf("SetNXPublish with a ttl of %v: %v, %v; want an error matching ErrInvalidLease", ttl, ok, err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if ok, err := sp.SetNXPublish(cctx, key, "x", time.Minute, channel, "cancelled"); ok || !errors.Is(err, context.Canceled) {
		t.Errorf("SetNXPublish with a cancelled context: %v, %v; want context.Canceled", ok, err)
	}
	if v, _ := getTTL(t, ctx, b, key); v != nil {
		t.Errorf("a SetNXPublish that failed before it was sent set the key to %#v", v)
	}
	// A message sent after them, the same way, is the first to arrive:
	// they published nothing.
	marker := p + ":marker"
	if ok, err := sp.SetNXPublish(ctx, marker, "x", time.Minute, channel, "marker"); !ok || err != nil {
		t.Fatalf("SetNXPublish of an absent key: %v, %v; want true", ok, err)
	}
	m, err := receive(ctx, sub, s.bound(5*time.Second))
	must(t, err, "receive")
	if m.Gap || m.Payload != "marker" {
		t.Errorf("first message received %+v, want the marker: a SetNXPublish that failed before it was sent published", m)
	}
}

func (s *suite) testSetNXPublishClosed(t *testing.T, ctx context.Context) {
	b := s.newBackend(t)
	sp := setPublisher(t, b)
	must(t, b.Close(), "close")
	if ok, err := sp.SetNXPublish(ctx, prefix()+":set", "x", time.Minute, prefix()+":ch", "x"); ok || !errors.Is(err, dsync.ErrClosed) {
		t.Errorf("SetNXPublish after Close: %v, %v; want ErrClosed", ok, err)
	}
}
