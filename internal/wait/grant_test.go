package wait

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/hub"
)

// quiet is a backend whose subscriptions deliver nothing: the tests below
// wake their waiters with hub.Deliver, as a release in the same session
// would.
type quiet struct{}

func (quiet) Eval(context.Context, *backend.Script, []string, ...any) (any, error) {
	return nil, dsync.ErrClosed
}

func (quiet) Subscribe(context.Context, string) (backend.Subscription, error) {
	return &quietSub{closed: make(chan struct{})}, nil
}

func (quiet) Close() error { return nil }

type quietSub struct {
	once   sync.Once
	closed chan struct{}
}

func (s *quietSub) Receive(ctx context.Context) (backend.Message, error) {
	select {
	case <-s.closed:
		return backend.Message{}, dsync.ErrClosed
	case <-ctx.Done():
		return backend.Message{}, ctx.Err()
	}
}

func (s *quietSub) Close() error {
	s.once.Do(func() { close(s.closed) })
	return nil
}

// scripted is an acquisition whose attempts reply as its results say, in
// turn, until the last, which it repeats. after, if set, runs after the
// attempt of that number (from 0) has replied, before the loop sees the
// reply: to deliver a wake-up then.
type scripted struct {
	h       *hub.Hub
	results []Result
	after   map[int]func()

	attempts int
	granted  []int64 // the tokens Granted was called with
}

func (s *scripted) Hub() *hub.Hub { return s.h }

func (s *scripted) Try(context.Context, Try) (Result, error) {
	n := s.attempts
	s.attempts++
	r := s.results[min(n, len(s.results)-1)]
	if f := s.after[n]; f != nil {
		f()
	}
	return r, nil
}

func (s *scripted) Granted(token int64, _ time.Time) bool {
	s.granted = append(s.granted, token)
	return true
}

func (s *scripted) Abandon(context.Context) error { return nil }

const grantChannel, grantWaiter = "ch", "op"

// acquireScripted runs Acquire on s, whose attempt number 1 (the first
// after the waiter joined) is followed by a wake-up carrying grant, and
// returns once it did.
func acquireScripted(t *testing.T, s *scripted, grant string) {
	t.Helper()
	s.h = hub.New(quiet{}, nil)
	s.after = map[int]func(){1: func() {
		if !s.h.Deliver(grantChannel, grantWaiter, grant) {
			t.Error("the waiter is not on the channel")
		}
	}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := Acquire(ctx, Spec{Channel: grantChannel, WaiterID: grantWaiter, Heartbeat: time.Hour}, s); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * hub.Linger) // the channel is unsubscribed
}

// A failed attempt that found the primitive free replies with token 0
// when the primitive's last token is not known (the key of a hold that
// expired is gone): a hand-off may have come before that attempt, so a
// grant that follows is confirmed by an attempt, not taken.
func TestGrantAfterAttemptWithoutTokenIsConfirmed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &scripted{results: []Result{
			{RetryIn: -1, Token: 5}, // held, before joining
			{RetryIn: -1},           // free, someone else's turn: no token
			{Acquired: true},
		}}
		acquireScripted(t, s, "6 x")
		if len(s.granted) != 0 {
			t.Errorf("Granted(%v) after an attempt that saw no token; want no call", s.granted)
		}
		if s.attempts != 3 {
			t.Errorf("%d attempts; want 3: the grant confirmed by one", s.attempts)
		}
	})
}

// A grant newer than the token the latest failed attempt saw was handed
// after that attempt: it is taken without another round trip.
func TestGrantNewerThanAttemptsTokenIsTaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &scripted{results: []Result{
			{RetryIn: -1, Token: 5},
			{RetryIn: -1, Token: 5},
			{Acquired: true},
		}}
		acquireScripted(t, s, "6 x")
		if len(s.granted) != 1 || s.granted[0] != 6 {
			t.Errorf("Granted called with %v; want [6]", s.granted)
		}
		if s.attempts != 2 {
			t.Errorf("%d attempts; want 2: the grant taken from the wake-up", s.attempts)
		}
	})
}

// A grant no newer than a token a failed attempt saw is older than that
// attempt: dropped, and the waiter tries again.
func TestGrantNotNewerThanAttemptsTokenIsDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &scripted{results: []Result{
			{RetryIn: -1, Token: 7},
			{RetryIn: -1, Token: 7},
			{Acquired: true},
		}}
		acquireScripted(t, s, "7 x")
		if len(s.granted) != 0 {
			t.Errorf("Granted(%v) for a grant no newer than the token seen; want no call", s.granted)
		}
		if s.attempts != 3 {
			t.Errorf("%d attempts; want 3", s.attempts)
		}
	})
}
