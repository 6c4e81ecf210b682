package fault

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/election"
)

// The election group of the soak: candidates campaign, lead, and resign,
// their terms checked as the watchdog group's holds are.

// soakCampaign is a candidate of the soak's election: Campaign, Resign, and
// the term's token and Done. fixed: its terms are on a fixed lease, which
// the client lets run out (their Done closes a margin before it ends on
// the server); renewed by the watchdog otherwise.
type soakCampaign struct {
	e     *election.Election
	fixed bool
}

// How a client keeps a term before it resigns.
const (
	termBrief  = iota // a few milliseconds: the read-modify-write, then Resign
	termLong          // renewed, up to one and a half leases, then as termBrief
	termRunOut        // a fixed lease, until Done closes; resigned then one time in two
)

// soakElection is a client of an election group: it campaigns in the
// election called name, with a ctx of 3s (a blocked campaign ends), and
// keeps each term it wins as termOnce says: most a few milliseconds, one
// time in sixteen renewed across a lease or more, one time in sixteen on a
// fixed lease until it runs out. Terms have the soak's lease, renewed by
// the watchdog but those on a fixed lease; each successful renewal is
// reported, as the watchdog group's are.
func soakElection(c *soakEnv, name string) error {
	c.reportRenewals()
	renewed := soakCampaign{e: election.New(c.b[0], name, election.WithWatchdog(c.lease), election.WithLogger(nil))}
	fixed := soakCampaign{e: election.New(c.b[0], name, election.WithLease(c.lease), election.WithLogger(nil)), fixed: true}
	for c.now() < c.end {
		switch c.rng.IntN(16) {
		case 0:
			c.termOnce(fixed, termRunOut)
		case 1:
			c.termOnce(renewed, termLong)
		default:
			c.termOnce(renewed, termBrief)
		}
	}
	return nil
}

// termOnce campaigns, and with the term won does a fenced read-modify-write
// of the register under its token a few milliseconds into it, and ends it
// as how says. The client says when Done closes (lost: before the
// Resign, the term was lost or ran out), and reads and writes all the
// same after a loss: the register's fence must refuse them. The events are
// the exclusive loop's: acq (won, with the term's token), fail, read,
// write, rel (Resign: ok if it resigned, known if it did or the term was
// over), lost.
func (c *soakEnv) termOnce(l soakCampaign, how int) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	call := c.now()
	term, err := l.e.Campaign(ctx, "client-"+strconv.Itoa(c.id))
	if err != nil {
		c.say(soakEvent{kind: "fail", call: call, ret: c.now()})
		return
	}
	token, err := term.Token(ctx)
	if err != nil {
		// Won but not fenced: no read or write under it; it is given back
		// (or runs out) before the attempt is told failed.
		term.Resign(ctx)
		c.say(soakEvent{kind: "fail", call: call, ret: c.now()})
		return
	}
	c.say(soakEvent{kind: "acq", token: token, call: call, ret: c.now()})
	go func() {
		<-term.Done()
		c.say(soakEvent{kind: "lost", token: token, call: c.now()})
	}()
	if how == termLong {
		select {
		case <-term.Done():
		case <-time.After(time.Duration(c.rng.Int64N(int64(c.lease) * 3 / 2))):
		}
	}
	time.Sleep(time.Duration(c.rng.IntN(5000)) * time.Microsecond)

	ctx, cancel = context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	rcall := c.now()
	c.say(soakEvent{kind: "read?", token: token, call: rcall})
	ok, v, err := c.reg.Read(ctx, token)
	c.say(soakEvent{kind: "read", token: token, call: rcall, ret: c.now(), ok: ok, known: err == nil, value: v})
	if ok && err == nil {
		wcall := c.now()
		c.say(soakEvent{kind: "write?", token: token, call: wcall, value: v + 1})
		ok, err := c.reg.Write(ctx, token, v+1)
		c.say(soakEvent{kind: "write", token: token, call: wcall, ret: c.now(), ok: ok, known: err == nil, value: v + 1})
	}
	if how == termRunOut {
		// Done closes a margin before the lease ends on the server.
		select {
		case <-term.Done():
		case <-time.After(2 * c.lease):
		}
		if c.rng.IntN(2) == 0 {
			return // ended by its lease alone
		}
	}
	ucall := c.now()
	c.say(soakEvent{kind: "rel?", token: token, call: ucall})
	err = term.Resign(ctx)
	c.say(soakEvent{kind: "rel", token: token, call: ucall, ret: c.now(), ok: err == nil, known: err == nil || errors.Is(err, dsync.ErrNotHeld)})
}

// freeElection wins the election called name for a fresh candidate, and
// resigns.
func freeElection(name string) func(context.Context, []backend.Backend) error {
	return func(ctx context.Context, b []backend.Backend) error {
		term, err := election.New(b[0], name, election.WithLogger(nil)).Campaign(ctx, "fresh")
		if err != nil {
			return err
		}
		return term.Resign(ctx)
	}
}

// checkElection checks an election group's events as the watchdog
// group's (checkExclusiveGroup: no two lease-valid terms overlap, no fenced
// update lost, the terms' history linearizable for a fenced mutex, the
// register's for a fenced register), and that every term's token is above
// that of every term won before its campaign began (tokenOrder), whoever
// led it.
func checkElection(group string) func([]soakEvent, time.Duration, int64, int64) soakReport {
	return func(events []soakEvent, lease time.Duration, value, writes int64) soakReport {
		r := checkExclusiveGroup(group, holdOpts{watchdog: true}, events, lease, value, writes)
		n := tokenOrder(group, buildHolds(events, lease, holdOpts{watchdog: true}).holds, &r)
		renewals := 0
		for _, e := range events {
			if e.kind == "renewed" {
				renewals++
			}
		}
		r.summary += fmt.Sprintf("; %d renewals; tokens out of order %d", renewals, n)
		return r
	}
}

// tokenOrder counts, and reports through r, the holds whose token is not
// above that of every hold acquired (its reply received) before their
// acquisition was sent: fencing tokens strictly increase across holds,
// whoever held them. Unknown tokens (0) are left out.
func tokenOrder(group string, holds []*soakHold, r *soakReport) int {
	var byCall, byFrom []*soakHold
	for _, h := range holds {
		if h.token != 0 {
			byCall = append(byCall, h)
		}
	}
	byFrom = slices.Clone(byCall)
	slices.SortFunc(byCall, func(a, b *soakHold) int { return cmp.Compare(a.call, b.call) })
	slices.SortFunc(byFrom, func(a, b *soakHold) int { return cmp.Compare(a.from, b.from) })
	n, j := 0, 0
	var top *soakHold // the highest token acquired so far
	for _, h := range byCall {
		for ; j < len(byFrom) && byFrom[j].from < h.call; j++ {
			if top == nil || byFrom[j].token > top.token {
				top = byFrom[j]
			}
		}
		if top != nil && h.token <= top.token {
			if n++; n <= 10 {
				r.fail("%s: client %d's term (token %d) campaigned at %s, after client %d's term (token %d) began at %s: its token is not above",
					group, h.client, h.token, time.Unix(0, h.call).Format("15:04:05.000000"),
					top.client, top.token, time.Unix(0, top.from).Format("15:04:05.000000"))
			}
		}
	}
	if n > 10 {
		r.fail("%s: tokens out of order %d more times", group, n-10)
	}
	return n
}

// The election's checker: terms that follow each other, one on a fixed
// lease left to run out, pass; a term won while another was valid, and a
// token below an earlier term's, are caught.
func TestSoakCheckerElection(t *testing.T) {
	terms := func(third, token int64) []soakEvent {
		return []soakEvent{
			{kind: "acq", client: 0, token: 10, call: 0, ret: 1 * msec},
			{kind: "read?", client: 0, token: 10, call: 2 * msec},
			{kind: "read", client: 0, token: 10, call: 2 * msec, ret: 3 * msec, ok: true, known: true, value: 0},
			{kind: "write?", client: 0, token: 10, call: 4 * msec, value: 1},
			{kind: "write", client: 0, token: 10, call: 4 * msec, ret: 5 * msec, ok: true, known: true, value: 1},
			{kind: "rel?", client: 0, token: 10, call: 6 * msec},
			{kind: "lost", client: 0, token: 10, call: 6 * msec}, // Done closes as Resign begins
			{kind: "acq", client: 1, token: 11, call: 3 * msec, ret: 7 * msec},
			{kind: "rel", client: 0, token: 10, call: 6 * msec, ret: 8 * msec, ok: true, known: true},
			// Client 1's term is on a fixed lease, left to run out: Done
			// closes a margin (12ms) before the lease ends, at 988ms.
			{kind: "lost", client: 1, token: 11, call: 988 * msec},
			{kind: "acq", client: 2, token: token, call: 10 * msec, ret: third},
			{kind: "rel?", client: 2, token: token, call: third + 5*msec},
			{kind: "rel", client: 2, token: token, call: third + 5*msec, ret: third + 6*msec, ok: true, known: true},
		}
	}
	check := checkElection("election")
	if r := check(terms(1001*msec, 12), time.Second, 1, 1); len(r.problems) > 0 {
		t.Fatalf("terms one after another: %v", r.problems)
	}
	if r := check(terms(900*msec, 12), time.Second, 1, 1); r.overlaps == 0 || !notLinearizable(r) {
		t.Errorf("a term won while a fixed-lease term was valid, not caught: %v", r)
	}
	r := check(terms(1001*msec, 9), time.Second, 1, 1)
	if !notLinearizable(r) || !slices.ContainsFunc(r.problems, func(p string) bool { return strings.Contains(p, "not above") }) {
		t.Errorf("a token below an earlier term's, not caught: %v", r.problems)
	}
}
