package script_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/internal/script"
	"github.com/dsyncgo/dsync/internal/testserver"
)

// clockTwice reads the clock through every helper of the library that
// reads it, twice, and seeds two tokens and two election-style revs from
// it: {1 if both reads agree, seconds, first token, second token}.
var clockTwice = script.New(`local ms1, us1 = now()
local s = now_s()
local t1 = next_token(nil, nil)
local t2 = next_token(nil, nil)
local ms2, us2 = now()
local same = 0
if ms1 == ms2 and us1 == us2 and s == math.floor(ms1 / 1000) then
  same = 1
end
return {same, s, t1, t2}
`)

// A script call reads the server clock once, however many parts of it ask
// for the time (each read is a command on the contended paths, where
// decode, hold_left and the body each used to read it), and two tokens
// seeded from that one reading in the same call still differ, in order.
func TestScriptReadsTheClockOncePerCall(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := srv.NewBackend(t)
	if _, err := b.Eval(ctx, clockTwice, nil); err != nil { // loads the script
		t.Fatal(err)
	}
	// The count is the server's: on a server that other tests share
	// ($DSYNC_REDIS_ADDR), their scripts may add to it, never take from
	// it, so one round of exactly one TIME per call proves the point, and
	// a script that read the clock twice could show none.
	const evals, rounds = 3, 5
	var counts []int64
	for range rounds {
		before := calls(t, srv, "time")
		for range evals {
			v, err := b.Eval(ctx, clockTwice, nil)
			if err != nil {
				t.Fatal(err)
			}
			r, _ := v.([]any)
			if len(r) != 4 || r[0] != int64(1) {
				t.Fatalf("reply %v; want the clock read alike by now and now_s", v)
			}
			t1, err1 := strconv.ParseInt(r[2].(string), 10, 64)
			t2, err2 := strconv.ParseInt(r[3].(string), 10, 64)
			if err1 != nil || err2 != nil || t2 != t1+1 {
				t.Fatalf("tokens seeded in one call: %v then %v; want the second one more than the first", r[2], r[3])
			}
		}
		n := calls(t, srv, "time") - before
		if n == evals {
			return
		}
		counts = append(counts, n)
	}
	t.Errorf("%d calls of the script ran TIME %v times in %d rounds; want once per call", evals, counts, rounds)
}
