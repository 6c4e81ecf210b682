package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/internal/keys"
	"github.com/dsyncgo/dsync/internal/tripmeter"
)

var hlenScript = backend.NewScript(`-- KEYS[1]: a hash. Reply: its size.
return redis.call('HLEN', KEYS[1])`)

// electionTests are the cases of package election: who leads, in which
// order, what ends a term, and what observers are told.
func (s *suite) electionRules() []rule {
	return []rule{
		{"OneLeaderAtATime", "never two terms whose Done is open at once; tokens strictly increase; every candidate leads", true, s.testElectionExclusive},
		{"ArrivalOrder", "candidates lead in the order they reached the server; State lists them so", false, s.testElectionOrder},
		{"ResignHandsOver", "Resign hands the term to the next candidate at once, by pub/sub across processes", false, s.testElectionResign},
		{"CancelledCampaignLeavesNothing", "a Campaign whose ctx ends returns the ctx's error and leaves nothing queued", false, s.testElectionCancel},
		{"EndedTermNotHeld", "a resigned or lost term's Proclaim and Resign are ErrNotHeld, and Done is closed", false, s.testElectionEnded},
		{"LeaderAndState", "Leader is ErrNoLeader without a term, else the leader's value, token and start; Proclaim changes the value", false, s.testElectionLeader},
		{"ObserveEveryChange", "observers see the current leader at once, then every change in order, the lapse as the zero Leader; the channel closes with ctx", false, s.testElectionObserve},
		{"ObserveOneSubscription", "the observers of an election through one backend share one subscription, gone when they are", false, s.testElectionObserveShared},
		{"DeletedKeysEndTerm", "a deletion of the election's keys closes the leader's Done, and observers see the lapse", false, s.testElectionDeleted},
		{"ExpiredTermObserved", "a term whose leader died with nobody queued is seen to lapse when its lease ends", false, s.testElectionExpired},
		{"DeadCandidateSkipped", "a candidate whose process died holds the queue up by at most the waiter timeout", false, s.testElectionDeadCandidate},
		{"BadArguments", "bad arguments are errors matching a sentinel, before any I/O; Observe closes at once", false, s.testElectionBadArguments},
		{"ForeignKeys", "a key holding something dsync did not write is ErrUnexpectedReply where it is read (Campaign reads the term's and the candidates' keys, Leader and Token the leader state), and left alone", false, s.testElectionForeign},
		{"LostReplies", "a Campaign or Resign whose reply was lost is retried and counts once: one term, one hand-over, each announced once", false, s.testElectionLostReplies},
		{"EveryCampaignACandidate", "a Campaign is a candidate of its own whatever owner its ctx carries: a second one with the same owner waits its turn", false, s.testElectionOwner},
		{"TokensAcrossLostKeys", "tokens increase by one across a term that ran out (the leader hash keeps the last), and still increase when every key is deleted", false, s.testElectionTokens},
		{"ValuesVerbatim", "values with spaces, newlines and any bytes reach Leader, State and observers as they were", false, s.testElectionValues},
	}
}

func openElection(b backend.Backend, p, name string, opts ...election.Option) *election.Election {
	return election.New(b, name, append([]election.Option{election.WithPrefix(p)}, opts...)...)
}

// electionKey returns the main key of the election name under p.
func electionKey(p, name string) string {
	k, err := keys.Base(p, "election", name)
	if err != nil {
		panic(err)
	}
	return k
}

type campaignResult struct {
	term *election.Term
	err  error
}

// campaign starts e.Campaign in the background.
func campaign(ctx context.Context, e *election.Election, value string) <-chan campaignResult {
	c := make(chan campaignResult, 1)
	go func() {
		t, err := e.Campaign(ctx, value)
		c <- campaignResult{t, err}
	}()
	return c
}

// awaitCandidates waits until n candidates are queued in e.
func awaitCandidates(t *testing.T, ctx context.Context, e *election.Election, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; ; i++ {
		st, err := e.State(ctx)
		must(t, err, "state")
		if st.Queued >= n {
			return
		}
		if time.Now().After(deadline) || i > 5000 {
			t.Fatalf("%d candidates not queued within 5s (%d are)", n, st.Queued)
		}
		time.Sleep(time.Millisecond)
	}
}

// nextLeader returns the next state an observer receives.
func nextLeader(t *testing.T, c <-chan election.Leader, d time.Duration, what string) election.Leader {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case l, ok := <-c:
		if !ok {
			t.Fatalf("%s: the observer's channel closed", what)
		}
		return l
	case <-timer.C:
		t.Fatalf("%s: nothing observed within %v", what, d)
		panic("unreachable")
	}
}

// awaitClosed fails t unless c is closed within d, draining it.
func awaitClosed[T any](t *testing.T, c <-chan T, d time.Duration, what string) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-c:
			if !ok {
				return
			}
		case <-timer.C:
			t.Fatalf("%s: not closed within %v", what, d)
		}
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func (s *suite) testElectionExclusive(t *testing.T, ctx context.Context) {
	const candidates, run = 4, 1500 * time.Millisecond
	p := prefix()
	var (
		mu     sync.Mutex
		terms  = make([]*election.Term, candidates) // each one's current term
		tokens [candidates]int64                    // and its token
		last   int64
		led    [candidates]int
	)
	elections := make([]*election.Election, candidates)
	for i := range elections {
		b := s.newBackend(t)
		if i%2 == 1 {
			b = elsewhere{b}
		}
		elections[i] = openElection(b, p, "exclusive")
	}
	// The run starts once every candidate is open, and a candidate that
	// has not led yet goes on past its end: on a loaded machine a
	// candidate's first Campaign may start late, and one that never
	// leads fails by its ctx's deadline, not by the clock.
	stop := time.Now().Add(run)
	var wg sync.WaitGroup
	for i, e := range elections {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < 10000; n++ {
				mu.Lock()
				done := led[i] > 0 && !time.Now().Before(stop)
				mu.Unlock()
				if done {
					break
				}
				term, err := e.Campaign(ctx, fmt.Sprint(i))
				if err != nil {
					t.Errorf("candidate %d: %v", i, err)
					return
				}
				tok, err := term.Token(ctx)
				if err != nil {
					t.Errorf("candidate %d: token: %v", i, err)
					term.Resign(ctx)
					return
				}
				mu.Lock()
				for j, o := range terms {
					if o != nil && j != i && !isClosed(o.Done()) {
						t.Errorf("candidate %d leads (token %d) while candidate %d's term (token %d) is open", i, tok, j, tokens[j])
					}
				}
				if tok <= last {
					t.Errorf("candidate %d's token %d after token %d", i, tok, last)
				}
				last = tok
				terms[i], tokens[i] = term, tok
				led[i]++
				mu.Unlock()
				time.Sleep(time.Millisecond)
				if err := term.Resign(ctx); err != nil {
					t.Errorf("candidate %d: resign: %v", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, n := range led {
		if n == 0 {
			t.Errorf("candidate %d never led: %v", i, led)
		}
	}
	t.Logf("terms per candidate: %v", led)
}

func (s *suite) testElectionOrder(t *testing.T, ctx context.Context) {
	const candidates = 5
	p := prefix()
	probe := openElection(s.newBackend(t), p, "order")
	first, err := openElection(s.newBackend(t), p, "order").Campaign(ctx, "first")
	must(t, err, "campaign")
	results := make([]<-chan campaignResult, candidates)
	for i := range candidates {
		b := s.newBackend(t)
		if i%2 == 1 {
			b = elsewhere{b}
		}
		results[i] = campaign(ctx, openElection(b, p, "order"), fmt.Sprint("c", i))
		awaitCandidates(t, ctx, probe, i+1)
	}
	st, err := probe.State(ctx)
	must(t, err, "state")
	if want := []string{"c0", "c1", "c2", "c3", "c4"}; fmt.Sprint(st.Candidates) != fmt.Sprint(want) || st.Leader.Value != "first" {
		t.Errorf("State: leader %q, candidates %q; want first, %q", st.Leader.Value, st.Candidates, want)
	}
	must(t, first.Resign(ctx), "resign")
	// Each leads in turn: the others are still waiting when it does.
	for i := range candidates {
		r := within(t, 10*time.Second, results[i], fmt.Sprint("candidate ", i))
		must(t, r.err, "candidate %d", i)
		for j := i + 1; j < candidates; j++ {
			select {
			case r := <-results[j]:
				t.Fatalf("candidate %d led before candidate %d resigned (%v)", j, i, r.err)
			default:
			}
		}
		must(t, r.term.Resign(ctx), "resign %d", i)
	}
}

func (s *suite) testElectionResign(t *testing.T, ctx context.Context) {
	p := prefix()
	leader := openElection(s.newBackend(t), p, "resign")
	next := openElection(elsewhere{s.newBackend(t)}, p, "resign")
	t1, err := leader.Campaign(ctx, "a")
	must(t, err, "campaign")
	tok1 := mustToken(t, t1) // while the term is on: see Term.Token
	got := campaign(ctx, next, "b")
	awaitCandidates(t, ctx, leader, 1)
	resigned := time.Now()
	must(t, t1.Resign(ctx), "resign")
	r := within(t, 5*time.Second, got, "the next candidate")
	must(t, r.err, "campaign")
	took := time.Since(resigned)
	t.Logf("Resign to the next leader: %v", took)
	// A wake-up by pub/sub, not the candidate's heartbeat (5s/3).
	if took > time.Second {
		t.Errorf("the next candidate led %v after Resign; want at once", took)
	}
	if mustToken(t, r.term) <= tok1 {
		t.Errorf("token %d after %d", mustToken(t, r.term), tok1)
	}
	l, err := leader.Leader(ctx)
	must(t, err, "leader")
	if l.Value != "b" || l.Token != mustToken(t, r.term) {
		t.Errorf("Leader after the hand-over: %+v; want b with token %d", l, mustToken(t, r.term))
	}
	must(t, r.term.Resign(ctx), "resign")
}

func (s *suite) testElectionCancel(t *testing.T, ctx context.Context) {
	p := prefix()
	b := s.newBackend(t)
	leader := openElection(b, p, "cancel")
	t1, err := leader.Campaign(ctx, "a")
	must(t, err, "campaign")
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = openElection(s.newBackend(t), p, "cancel").Campaign(cctx, "b")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Campaign with a ctx that ended while queued: %v; want context.DeadlineExceeded", err)
	}
	// It leaves the queue as it returns, or, when that takes longer than
	// the 100ms past the deadline a call waits for, in the background
	// right after.
	for i, deadline := 0, time.Now().Add(s.bound(time.Second)); ; i++ {
		st, err := leader.State(ctx)
		must(t, err, "state")
		n, err := b.Eval(ctx, hlenScript, []string{electionKey(p, "cancel") + ":values"})
		must(t, err, "HLEN")
		if st.Queued == 0 && len(st.Candidates) == 0 && n == int64(0) {
			break
		}
		if time.Now().After(deadline) || i > 10000 {
			t.Fatalf("after the Campaign gave up: %d queued (%q), %v values kept; want none within %v", st.Queued, st.Candidates, n, s.bound(time.Second))
		}
		time.Sleep(time.Millisecond)
	}
	// Resign finds nobody to hand the term to.
	must(t, t1.Resign(ctx), "resign")
	if _, err := leader.Leader(ctx); !errors.Is(err, dsync.ErrNoLeader) {
		t.Errorf("Leader after the only leader resigned: %v; want ErrNoLeader", err)
	}
}

func (s *suite) testElectionEnded(t *testing.T, ctx context.Context) {
	p := prefix()
	e := openElection(s.newBackend(t), p, "ended")
	t1, err := e.Campaign(ctx, "a")
	must(t, err, "campaign")
	must(t, t1.Resign(ctx), "resign")
	if !isClosed(t1.Done()) {
		t.Error("Done of a resigned term is open")
	}
	if err := t1.Proclaim(ctx, "x"); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("Proclaim on a resigned term: %v; want ErrNotHeld", err)
	}
	if err := t1.Resign(ctx); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("a second Resign: %v; want ErrNotHeld", err)
	}

	// Lost: taken by ForceResign through another process.
	t2, err := e.Campaign(ctx, "b")
	must(t, err, "campaign")
	took, err := openElection(s.newBackend(t), p, "ended").ForceResignToken(ctx, mustToken(t, t2))
	must(t, err, "force resign")
	if !took {
		t.Fatal("ForceResignToken took nothing")
	}
	// The leader learns it at its next renewal, or at once by Proclaim.
	if err := t2.Proclaim(ctx, "y"); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("Proclaim on a lost term: %v; want ErrNotHeld", err)
	}
	within(t, time.Second, t2.Done(), "Done of the lost term")
	if err := t2.Resign(ctx); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("Resign of a lost term: %v; want ErrNotHeld", err)
	}
	if t2.Value() != "b" {
		t.Errorf("Value after a failed Proclaim: %q; want b", t2.Value())
	}
}

func (s *suite) testElectionLeader(t *testing.T, ctx context.Context) {
	p := prefix()
	e := openElection(s.newBackend(t), p, "leader")
	other := openElection(s.newBackend(t), p, "leader")
	if _, err := other.Leader(ctx); !errors.Is(err, dsync.ErrNoLeader) {
		t.Fatalf("Leader of a new election: %v; want ErrNoLeader", err)
	}
	before := time.Now()
	term, ok, err := e.TryCampaign(ctx, "a:1")
	must(t, err, "try campaign")
	if !ok {
		t.Fatal("TryCampaign on a free election did not lead")
	}
	l, err := other.Leader(ctx)
	must(t, err, "leader")
	// Began is the server's clock: allow for a few seconds of skew.
	if l.Value != "a:1" || l.Token != mustToken(t, term) || l.Began.Before(before.Add(-5*time.Second)) || l.Began.After(time.Now().Add(5*time.Second)) {
		t.Errorf("Leader: %+v; want a:1 with token %d begun about %v", l, mustToken(t, term), before)
	}
	if _, ok, err := other.TryCampaign(ctx, "b"); ok || err != nil {
		t.Errorf("TryCampaign while a term is on: %v, %v; want false", ok, err)
	}
	must(t, term.Proclaim(ctx, "a:2"), "proclaim")
	l2, err := other.Leader(ctx)
	must(t, err, "leader")
	if l2.Value != "a:2" || term.Value() != "a:2" || l2.Token != l.Token || !l2.Began.Equal(l.Began) {
		t.Errorf("after Proclaim: Leader %+v, Value %q; want a:2, the same token and start as %+v", l2, term.Value(), l)
	}
	st, err := other.State(ctx)
	must(t, err, "state")
	if st.Leader != l2 || st.Owner == "" || st.TTL <= 0 || st.LastToken != mustToken(t, term) || st.Queued != 0 {
		t.Errorf("State: %+v", st)
	}
	must(t, term.Resign(ctx), "resign")
	st, err = other.State(ctx)
	must(t, err, "state")
	if !st.Leader.IsZero() || st.LastToken != mustToken(t, term) || st.TTL != 0 {
		t.Errorf("State after the lapse: %+v; want no leader, last token %d", st, mustToken(t, term))
	}
}

func (s *suite) testElectionObserve(t *testing.T, ctx context.Context) {
	p := prefix()
	a := openElection(s.newBackend(t), p, "observe")
	bb := openElection(elsewhere{s.newBackend(t)}, p, "observe")
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	watchers := []<-chan election.Leader{
		openElection(s.newBackend(t), p, "observe").Observe(octx),
		openElection(s.newBackend(t), p, "observe").Observe(octx),
	}
	// Once the observers are subscribed, nothing arrives: no leader yet.
	probe := openElection(s.newBackend(t), p, "observe")
	await := func(want election.Leader, what string) {
		t.Helper()
		for i, w := range watchers {
			if got := nextLeader(t, w, 5*time.Second, what); got != want {
				t.Fatalf("observer %d, %s: %+v; want %+v", i, what, got, want)
			}
		}
	}
	leaderOf := func(what string) election.Leader {
		t.Helper()
		l, err := probe.Leader(ctx)
		must(t, err, "leader (%s)", what)
		return l
	}
	t1, err := a.Campaign(ctx, "a")
	must(t, err, "campaign")
	await(leaderOf("a"), "a leads")
	must(t, t1.Proclaim(ctx, "a2"), "proclaim")
	await(leaderOf("a2"), "a proclaims a2")
	must(t, t1.Proclaim(ctx, "a2"), "proclaim")
	got := campaign(ctx, bb, "b")
	awaitCandidates(t, ctx, probe, 1)
	must(t, t1.Resign(ctx), "resign")
	r := within(t, 5*time.Second, got, "b")
	must(t, r.err, "campaign")
	await(leaderOf("b"), "handed to b (the same value proclaimed twice is one state)")
	// A late observer gets the current leader at once.
	late := openElection(s.newBackend(t), p, "observe").Observe(octx)
	if l := nextLeader(t, late, 5*time.Second, "late observer"); l.Value != "b" {
		t.Errorf("a late observer's first state: %+v; want b", l)
	}
	must(t, r.term.Resign(ctx), "resign")
	await(election.Leader{}, "lapse")
	cancel()
	for i, w := range append(watchers, late) {
		awaitClosed(t, w, 5*time.Second, fmt.Sprint("observer ", i))
	}
}

func (s *suite) testElectionObserveShared(t *testing.T, ctx context.Context) {
	p := prefix()
	b := s.newBackend(t)
	channel := electionKey(p, "shared") + ":observe"
	octx, cancel := context.WithCancel(ctx)
	var watchers []<-chan election.Leader
	for range 20 {
		watchers = append(watchers, openElection(b, p, "shared").Observe(octx))
	}
	// The subscription is made asynchronously: a change makes sure.
	term, err := openElection(s.newBackend(t), p, "shared").Campaign(ctx, "x")
	must(t, err, "campaign")
	for i, w := range watchers {
		if l := nextLeader(t, w, 5*time.Second, fmt.Sprint("observer ", i)); l.Value != "x" {
			t.Fatalf("observer %d: %+v", i, l)
		}
	}
	n, ok, err := s.subscribers(ctx, b, channel)
	must(t, err, "subscribers")
	if ok && n != 1 {
		t.Errorf("20 observers on one backend: %d subscriptions; want 1", n)
	}
	cancel()
	for i, w := range watchers {
		awaitClosed(t, w, 5*time.Second, fmt.Sprint("observer ", i))
	}
	s.awaitUnsubscribed(t, ctx, b, channel)
	must(t, term.Resign(ctx), "resign")
}

func (s *suite) testElectionDeleted(t *testing.T, ctx context.Context) {
	const lease = 600 * time.Millisecond
	p := prefix()
	b := s.newBackend(t)
	e := openElection(b, p, "deleted", election.WithWatchdog(lease))
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := openElection(s.newBackend(t), p, "deleted").Observe(octx)
	term, err := e.Campaign(ctx, "a")
	must(t, err, "campaign")
	tok := mustToken(t, term)
	if l := nextLeader(t, w, 5*time.Second, "a leads"); l.Value != "a" {
		t.Fatalf("observed %+v; want a", l)
	}
	k := electionKey(p, "deleted")
	var all []string
	for _, suffix := range []string{"", ":queue", ":expiry", ":values", ":leader"} {
		all = append(all, k+suffix)
	}
	deleted := time.Now()
	_, err = b.Eval(ctx, delScript, all)
	must(t, err, "DEL")
	within(t, lease, term.Done(), "Done after the deletion")
	lost := time.Since(deleted)
	if l := nextLeader(t, w, 2*time.Second, "the lapse"); !l.IsZero() {
		t.Fatalf("observed %+v after the deletion; want the zero Leader", l)
	}
	t.Logf("keys deleted: Done after %v, the lapse observed after %v", lost, time.Since(deleted))
	if err := term.Resign(ctx); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("Resign of the deleted term: %v; want ErrNotHeld", err)
	}
	// The election goes on, with a greater token. The next term is won
	// on the same backend, whose session lost the first, but through a
	// handle with the default lease. On the short one, a term whose steps
	// below (a token, the observer's read, the Resign) took over a third
	// of it would live only if its renewal, sent then, were answered
	// within some 390ms more, which a loaded machine does not promise;
	// unanswered by its deadline, the term is lost, as it should be, and
	// its Resign says so.
	t2, err := openElection(b, p, "deleted").Campaign(ctx, "b")
	must(t, err, "campaign after the deletion")
	if mustToken(t, t2) <= tok {
		t.Errorf("token %d after %d", mustToken(t, t2), tok)
	}
	if l := nextLeader(t, w, 5*time.Second, "b leads"); l.Value != "b" {
		t.Fatalf("observed %+v; want b", l)
	}
	must(t, t2.Resign(ctx), "resign")
}

func (s *suite) testElectionExpired(t *testing.T, ctx context.Context) {
	const lease = 500 * time.Millisecond
	p := prefix()
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := openElection(s.newBackend(t), p, "expired").Observe(octx)
	// The leader's process dies: its backend closes under the term, which
	// stays on the server until its lease runs out.
	db := s.newBackend(t)
	term, err := openElection(db, p, "expired", election.WithLease(lease), election.WithLogger(nil)).Campaign(ctx, "a")
	must(t, err, "campaign")
	began := time.Now()
	if l := nextLeader(t, w, 5*time.Second, "a leads"); l.Value != "a" {
		t.Fatalf("observed %+v; want a", l)
	}
	db.Close()
	if l := nextLeader(t, w, lease+2*time.Second, "the lapse"); !l.IsZero() {
		t.Fatalf("observed %+v; want the zero Leader", l)
	}
	d := time.Since(began)
	t.Logf("a %v term whose leader died was seen to lapse %v after it began", lease, d)
	if d < lease-50*time.Millisecond {
		t.Errorf("lapse observed after %v, before the lease of %v ran out", d, lease)
	}
	if d > lease+500*time.Millisecond {
		t.Errorf("lapse observed after %v; want within 500ms of the lease's end (%v)", d, lease)
	}
	within(t, time.Second, term.Done(), "Done of the dead leader's term")
}

func (s *suite) testElectionDeadCandidate(t *testing.T, ctx context.Context) {
	const timeout = 500 * time.Millisecond
	p := prefix()
	open := func(b backend.Backend) *election.Election {
		return openElection(b, p, "dead", election.WithWaiterTimeout(timeout))
	}
	leader := open(s.newBackend(t))
	t1, err := leader.Campaign(ctx, "a")
	must(t, err, "campaign")
	db := s.newBackend(t)
	dead := campaign(ctx, open(db), "dead")
	awaitCandidates(t, ctx, leader, 1)
	live := campaign(ctx, open(s.newBackend(t)), "live")
	awaitCandidates(t, ctx, leader, 2)
	db.Close()
	if r := within(t, 5*time.Second, dead, "the dead candidate's Campaign"); r.err == nil {
		t.Fatal("the dead candidate led")
	}
	// The bound allows for a loaded machine's round trips, timed
	// meanwhile, and only for them (see tripmeter).
	trips := tripmeter.Start(t, ctx, s.newBackend(t))
	resigned := time.Now()
	must(t, t1.Resign(ctx), "resign")
	r := within(t, 5*time.Second, live, "the live candidate")
	must(t, r.err, "campaign")
	d, slow := time.Since(resigned), trips.Stop()
	if d > timeout+s.bound(300*time.Millisecond)+loadAllowance(slow, trips) {
		t.Errorf("the live candidate behind a dead one led %v after Resign; want at most the waiter timeout %v, and %v more for the longest round trip timed meanwhile, three times (or the meter's stalls, %v, if more, up to %v)", d, timeout, slow, trips.Stalled(), stallAllowance)
	}
	if l, err := leader.Leader(ctx); err != nil || l.Value != "live" {
		t.Errorf("Leader: %+v, %v; want live", l, err)
	}
	must(t, r.term.Resign(ctx), "resign")
}

func (s *suite) testElectionBadArguments(t *testing.T, ctx context.Context) {
	b := newSpy(s.newBackend(t))
	for _, c := range []struct {
		name string
		e    *election.Election
		want error
	}{
		{"nil backend", election.New(nil, "x"), dsync.ErrInvalidBackend},
		{"empty name", election.New(b, ""), dsync.ErrInvalidName},
		{"bad prefix", election.New(b, "x", election.WithPrefix("{")), dsync.ErrInvalidName},
		{"zero lease", election.New(b, "x", election.WithLease(0)), dsync.ErrInvalidLease},
		{"short waiter timeout", election.New(b, "x", election.WithWaiterTimeout(time.Millisecond)), dsync.ErrInvalidLease},
		{"zero value", new(election.Election), dsync.ErrInvalidBackend},
	} {
		if _, err := c.e.Campaign(ctx, "v"); !errors.Is(err, c.want) {
			t.Errorf("%s: Campaign: %v; want %v", c.name, err, c.want)
		}
		if _, _, err := c.e.TryCampaign(ctx, "v"); !errors.Is(err, c.want) {
			t.Errorf("%s: TryCampaign: %v; want %v", c.name, err, c.want)
		}
		if _, err := c.e.Leader(ctx); !errors.Is(err, c.want) {
			t.Errorf("%s: Leader: %v; want %v", c.name, err, c.want)
		}
		if _, err := c.e.ForceResign(ctx); !errors.Is(err, c.want) {
			t.Errorf("%s: ForceResign: %v; want %v", c.name, err, c.want)
		}
		awaitClosed(t, c.e.Observe(ctx), time.Second, c.name+": Observe")
	}
	if n := b.count(); n != 0 {
		t.Errorf("%d backend calls with bad arguments; want none", n)
	}
	e := openElection(b, prefix(), "x")
	if _, err := e.ForceResignToken(ctx, 0); !errors.Is(err, dsync.ErrNotHeld) {
		t.Errorf("ForceResignToken(0): %v; want ErrNotHeld", err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := e.Campaign(done, "v"); !errors.Is(err, context.Canceled) {
		t.Errorf("Campaign with a cancelled ctx: %v; want context.Canceled", err)
	}
	awaitClosed(t, e.Observe(done), time.Second, "Observe with a cancelled ctx")
	if n := b.count(); n != 0 {
		t.Errorf("%d backend calls; want none", n)
	}
}

func (s *suite) testElectionForeign(t *testing.T, ctx context.Context) {
	p := prefix()
	b := s.newBackend(t)
	k := electionKey(p, "foreign")
	e := openElection(b, p, "foreign")
	for _, key := range []string{k, k + ":leader"} {
		_, err := b.Eval(ctx, setScript, []string{key}, "not dsync's")
		must(t, err, "SET")
		term, err := e.Campaign(ctx, "v")
		if key == k {
			if !errors.Is(err, dsync.ErrUnexpectedReply) {
				t.Errorf("Campaign with %s foreign: %v; want ErrUnexpectedReply", key, err)
			}
		} else {
			// A plain campaign does not read the leader state: the
			// term's first read does, and so does its token's draw.
			must(t, err, "campaign with %s foreign", key)
			if _, err := term.Token(ctx); !errors.Is(err, dsync.ErrUnexpectedReply) {
				t.Errorf("Token with %s foreign: %v; want ErrUnexpectedReply", key, err)
			}
		}
		if _, err := e.Leader(ctx); !errors.Is(err, dsync.ErrUnexpectedReply) {
			t.Errorf("Leader with %s foreign: %v; want ErrUnexpectedReply", key, err)
		}
		if term != nil {
			must(t, term.Resign(ctx), "resign with %s foreign", key)
		}
		v, err := b.Eval(ctx, keysScript, []string{k}, k+"*")
		must(t, err, "KEYS")
		r, _ := v.([]any)
		if len(r) != 3 || r[0] != key || r[2] != "not dsync's" {
			t.Errorf("keys after the campaign with %s foreign: %v; want it alone, unchanged", key, r)
		}
		_, err = b.Eval(ctx, delScript, []string{key})
		must(t, err, "DEL")
	}
	// A candidate's keys, while a leader holds.
	term, err := e.Campaign(ctx, "leader")
	must(t, err, "campaign")
	for _, key := range []string{k + ":values", k + ":queue"} {
		_, err := b.Eval(ctx, setScript, []string{key}, "not dsync's")
		must(t, err, "SET")
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = openElection(s.newBackend(t), p, "foreign").Campaign(cctx, "v")
		cancel()
		if !errors.Is(err, dsync.ErrUnexpectedReply) {
			t.Errorf("Campaign with %s foreign: %v; want ErrUnexpectedReply", key, err)
		}
		v, err := b.Eval(ctx, getScript, []string{key})
		must(t, err, "GET")
		if v != "not dsync's" {
			t.Errorf("%s after the campaign: %v; want it unchanged", key, v)
		}
		_, err = b.Eval(ctx, delScript, []string{key})
		must(t, err, "DEL")
		if st, err := e.State(ctx); err != nil || st.Queued != 0 || st.Leader.Value != "leader" {
			t.Errorf("State after the campaign with %s foreign: %+v, %v; want the leader alone", key, st, err)
		}
	}
	must(t, term.Resign(ctx), "resign")
}

func (s *suite) testElectionLostReplies(t *testing.T, ctx context.Context) {
	p := prefix()
	sp := newSpy(s.newBackend(t))
	e := openElection(sp, p, "lost")
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := openElection(s.newBackend(t), p, "lost").Observe(octx)
	sp.loseReplies(1)
	term, err := e.Campaign(ctx, "a")
	must(t, err, "campaign whose first reply was lost")
	if l := nextLeader(t, w, 5*time.Second, "a leads"); l.Value != "a" || l.Token != mustToken(t, term) {
		t.Fatalf("observed %+v; want a with token %d", l, mustToken(t, term))
	}
	next := campaign(ctx, openElection(s.newBackend(t), p, "lost"), "b")
	awaitCandidates(t, ctx, e, 1)
	sp.loseReplies(1)
	must(t, term.Resign(ctx), "resign whose first reply was lost")
	r := within(t, 5*time.Second, next, "b")
	must(t, r.err, "campaign")
	if l := nextLeader(t, w, 5*time.Second, "b leads"); l.Value != "b" || l.Token != mustToken(t, r.term) || mustToken(t, r.term) != mustToken(t, term)+1 {
		t.Fatalf("observed %+v (token %d after %d); want b, the next token", l, mustToken(t, r.term), mustToken(t, term))
	}
	must(t, r.term.Resign(ctx), "resign")
	if l := nextLeader(t, w, 5*time.Second, "the lapse"); !l.IsZero() {
		t.Fatalf("observed %+v; want the lapse, and nothing between", l)
	}
}

func (s *suite) testElectionOwner(t *testing.T, ctx context.Context) {
	p := prefix()
	e := openElection(s.newBackend(t), p, "owner")
	owner := dsync.WithOwner(ctx)
	first, err := e.Campaign(owner, "first")
	must(t, err, "campaign")
	tok := mustToken(t, first)
	second := campaign(owner, e, "second")
	awaitCandidates(t, ctx, e, 1)
	select {
	case r := <-second:
		t.Fatalf("a second Campaign with the leader's owner led at once (%v)", r.err)
	default:
	}
	must(t, first.Resign(ctx), "resign")
	r := within(t, 5*time.Second, second, "the second campaign")
	must(t, r.err, "campaign")
	if mustToken(t, r.term) <= tok {
		t.Errorf("token %d after %d", mustToken(t, r.term), tok)
	}
	must(t, r.term.Resign(ctx), "resign")
}

func (s *suite) testElectionValues(t *testing.T, ctx context.Context) {
	p := prefix()
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := openElection(s.newBackend(t), p, "values").Observe(octx)
	e := openElection(s.newBackend(t), p, "values")
	values := []string{"two words", "line\nbreak", " ", "", "\x00\xff{}|/%", "1 0 2 3 4 5"}
	term, err := e.Campaign(ctx, values[0])
	must(t, err, "campaign")
	for i, v := range values {
		if i > 0 {
			must(t, term.Proclaim(ctx, v), "proclaim %q", v)
		}
		if l := nextLeader(t, w, 5*time.Second, fmt.Sprintf("value %q", v)); l.Value != v {
			t.Errorf("observed %q; want %q", l.Value, v)
		}
		if l, err := e.Leader(ctx); err != nil || l.Value != v {
			t.Errorf("Leader: %+v, %v; want %q", l, err, v)
		}
	}
	next := campaign(ctx, openElection(s.newBackend(t), p, "values"), values[1])
	awaitCandidates(t, ctx, e, 1)
	st, err := e.State(ctx)
	must(t, err, "state")
	if len(st.Candidates) != 1 || st.Candidates[0] != values[1] {
		t.Errorf("State's candidates %q; want %q", st.Candidates, values[1:2])
	}
	must(t, term.Resign(ctx), "resign")
	r := within(t, 5*time.Second, next, "next")
	must(t, r.err, "campaign")
	if l := nextLeader(t, w, 5*time.Second, "handed over"); l.Value != values[1] {
		t.Errorf("observed %q after the hand-over; want %q", l.Value, values[1])
	}
	must(t, r.term.Resign(ctx), "resign")
}

func (s *suite) testElectionTokens(t *testing.T, ctx context.Context) {
	const lease = 100 * time.Millisecond
	p := prefix()
	b := s.newBackend(t)
	e := openElection(b, p, "tokens", election.WithLease(lease), election.WithLogger(nil))
	t1, tok1 := campaignToken(t, ctx, e, "a") // while the term is on: see Term.Token
	within(t, time.Second, t1.Done(), "Done of the term that ran out")
	// Until the main key is gone on the server too.
	k := electionKey(p, "tokens")
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; ; i++ {
		v, err := b.Eval(ctx, keysScript, []string{k}, k)
		must(t, err, "KEYS")
		if r, _ := v.([]any); len(r) == 0 {
			break
		}
		if time.Now().After(deadline) || i > 1000 {
			t.Fatal("the main key of a term that ran out is still there after 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	t2, tok2 := campaignToken(t, ctx, e, "b")
	if tok2 != tok1+1 {
		t.Errorf("token %d after %d, whose term ran out; want the next one", tok2, tok1)
	}
	resignOrRanOut(t, ctx, t2)
	_, err := b.Eval(ctx, delScript, []string{k, k + ":queue", k + ":expiry", k + ":values", k + ":leader"})
	must(t, err, "DEL")
	t3, tok3 := campaignToken(t, ctx, e, "c")
	if tok3 <= tok2 {
		t.Errorf("token %d after %d, the election's keys deleted; want a greater one", tok3, tok2)
	}
	resignOrRanOut(t, ctx, t3)
}

// campaignToken campaigns with value and returns the term and its token.
// A term on a short lease that a loaded machine let run out before its
// token was drawn drew none: Token says it is not held, Done closes, and
// the campaign is made again, up to five times.
func campaignToken(t *testing.T, ctx context.Context, e *election.Election, value string) (*election.Term, int64) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		term, err := e.Campaign(ctx, value)
		must(t, err, "campaign")
		tok, err := term.Token(context.Background())
		if err == nil {
			return term, tok
		}
		if !errors.Is(err, dsync.ErrNotHeld) || attempt == 5 {
			t.Fatalf("Token (campaign %d): %v", attempt, err)
		}
		select {
		case <-term.Done():
		case <-time.After(time.Second):
			t.Fatalf("Token (campaign %d): %v, and Done still open 1s later", attempt, err)
		}
		t.Logf("campaign %d: the term ran out before its token was drawn (%v): once more", attempt, err)
	}
}

// resignOrRanOut resigns t, a term on a short lease that a loaded machine
// may let run out first: then Resign must say it is not held, and Done
// must be closed.
func resignOrRanOut(t *testing.T, ctx context.Context, term *election.Term) {
	t.Helper()
	err := term.Resign(ctx)
	if err != nil && (!errors.Is(err, dsync.ErrNotHeld) || !isClosed(term.Done())) {
		t.Fatalf("resign: %v", err)
	}
}

// mustToken returns term's fencing token, and fails the test if Token
// returns an error. Not for goroutines other than the test's.
func mustToken(t testing.TB, term *election.Term) int64 {
	t.Helper()
	tok, err := term.Token(context.Background())
	if err != nil {
		t.Fatalf("Token: %v", err)
	}
	return tok
}
