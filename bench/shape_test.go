package bench

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

func shapeImpl(t *testing.T, name string) ShapeImpl {
	t.Helper()
	for _, i := range ShapeImpls() {
		if i.Name == name {
			return i
		}
	}
	t.Fatalf("no service-shape row %q", name)
	return ShapeImpl{}
}

// The PING rows cost the server exactly their two commands per pair: the
// cell counts every pair it ran, and nothing of its warm-up or of the
// harness's INFO calls.
func TestShapeCellPingsCostTwoCommands(t *testing.T) {
	addr := redisAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, name := range []string{"ping-redigo", "ping-rueidis"} {
		c, err := RunShapeCell(ctx, addr, shapeImpl(t, name), 3, "deadline", 150*time.Millisecond)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if c.Pairs < 10 || c.Elapsed < 150*time.Millisecond {
			t.Errorf("%s: %d pairs in %v; want at least 10, in at least 150ms", name, c.Pairs, c.Elapsed)
		}
		if per := float64(c.ServerCalls) / float64(c.Pairs); per < 2 || per > 2.05 {
			t.Errorf("%s: %.3f server commands per pair (%d for %d pairs), want 2", name, per, c.ServerCalls, c.Pairs)
		}
		if c.RedisCPU <= 0 {
			t.Errorf("%s: Redis CPU %v", name, c.RedisCPU)
		}
		if _, ok := processCPU(); ok && c.ClientCPU <= 0 {
			t.Errorf("%s: client CPU %v", name, c.ClientCPU)
		}
	}
}

// Each goroutine locks a name of its own: redsync, which would retry
// after 50-250ms on a name another goroutine holds, runs its four
// commands per pair (SET NX, then a script's call, GET and DEL) and never
// more; dsync's pairs succeed with a few commands each.
func TestShapeCellNamesOfTheirOwn(t *testing.T) {
	addr := redisAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs, err := RunShapeCell(ctx, addr, shapeImpl(t, shapeRedsyncRedigo), 8, "deadline", 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if per := float64(rs.ServerCalls) / float64(max(1, rs.Pairs)); rs.Pairs < 40 || per < 4 || per > 4.05 {
		t.Errorf("redsync, 8 goroutines: %d pairs, %.3f server commands per pair; want at least 40, and 4", rs.Pairs, per)
	}
	for _, caller := range []string{"deadline", "background"} {
		d, err := RunShapeCell(ctx, addr, shapeImpl(t, "dsync-redigo"), 8, caller, 200*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if per := float64(d.ServerCalls) / float64(max(1, d.Pairs)); d.Pairs < 40 || per < 2 || per > 6 {
			t.Errorf("dsync, 8 goroutines, %s: %d pairs, %.3f server commands per pair; want at least 40, and 2 to 6", caller, d.Pairs, per)
		}
	}
	if _, err := RunShapeCell(ctx, addr, shapeImpl(t, "dsync-redigo"), 0, "deadline", time.Second); err == nil {
		t.Error("0 goroutines: no error")
	}
}

// RunShape runs every row in every round, the rows' order reversed every
// other round, and the lock rows alone with context.Background() at the
// number of goroutines it is given for that.
func TestRunShapeInterleaves(t *testing.T) {
	addr := redisAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var steps []string
	res, err := RunShape(ctx, addr, []int{1, 2}, 2, 2, 30*time.Millisecond, func(s string) error {
		steps = append(steps, s)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	impls := ShapeImpls()
	locks := 0
	for _, impl := range impls {
		for _, g := range []int{1, 2} {
			if cs := res.Cells[ShapeKey{impl.Name, g, "deadline"}]; len(cs) != 2 || cs[0].Pairs == 0 || cs[1].Pairs == 0 {
				t.Errorf("%s, %d goroutines, deadline: %d rounds %+v; want 2, with pairs", impl.Name, g, len(cs), cs)
			}
		}
		bg := res.Cells[ShapeKey{impl.Name, 2, "background"}]
		if impl.Lock {
			locks++
			if len(bg) != 2 {
				t.Errorf("%s, background: %d rounds, want 2", impl.Name, len(bg))
			}
		} else if len(bg) != 0 {
			t.Errorf("%s takes no context, yet ran with context.Background()", impl.Name)
		}
		if _, ok := res.Cells[ShapeKey{impl.Name, 1, "background"}]; ok {
			t.Errorf("%s ran with context.Background() at 1 goroutine", impl.Name)
		}
	}
	if want := 2 * (2*len(impls) + locks); len(steps) != want {
		t.Fatalf("%d steps, want %d", len(steps), want)
	}
	// The first column of each round: G=1, deadline, every row.
	first := func(round int) []string {
		var names []string
		for _, s := range steps[round*(2*len(impls)+locks):][:len(impls)] {
			names = append(names, s[strings.LastIndex(s, ": ")+2:])
		}
		return names
	}
	r0, r1 := first(0), first(1)
	slices.Reverse(r1)
	if !slices.Equal(r0, r1) {
		t.Errorf("round 2 ran %v, want round 1's order %v reversed", first(1), r0)
	}
}

// The target lines compare dsync over each client with redsync over the
// same one, round by round, at 64 goroutines.
func TestShapeTargets(t *testing.T) {
	cells := func(rate float64, cpu time.Duration) []ShapeCell {
		var cs []ShapeCell
		for range 3 {
			n := int64(rate)
			cs = append(cs, ShapeCell{Pairs: n, Elapsed: time.Second, RedisCPU: cpu * time.Duration(n), ServerCalls: 4 * n})
		}
		return cs
	}
	r := &Report{Config: Config{ShapeOnly: true}, Shape: ShapeResult{Rounds: 3, Each: time.Second, Cells: map[ShapeKey][]ShapeCell{}}}
	set := func(name string, rate float64, cpu time.Duration) {
		r.Shape.Cells[ShapeKey{name, 64, "deadline"}] = cells(rate, cpu)
	}
	set(shapeRedsyncRedigo, 10000, 30*time.Microsecond)
	set(shapeRedsyncGoRedis, 8000, 30*time.Microsecond)
	set(shapeRueidislock, 14000, 20*time.Microsecond)
	set("dsync-redigo", 11000, 28*time.Microsecond) // met, met
	set("dsync-goredis", 7000, 33*time.Microsecond) // missed, missed
	set("dsync-rueidis", 16000, 15*time.Microsecond)
	set("ping-redigo", 20000, 20*time.Microsecond)
	var out strings.Builder
	r.writeTargets(&out)
	got := out.String()
	for _, want := range []string{
		"met    service shape, 64 goroutines: dsync-redigo 11000 pairs/s = 1.10x redsync-redigo's (target >= 1.0x)",
		"met    service shape, 64 goroutines: dsync-redigo Redis CPU 28.0µs per pair = 0.93x redsync-redigo's (target <= 1.0x)",
		"MISSED service shape, 64 goroutines: dsync-goredis 7000 pairs/s = 0.88x redsync-goredis's (target >= 1.0x)",
		"MISSED service shape, 64 goroutines: dsync-goredis Redis CPU 33.0µs per pair = 1.10x redsync-goredis's (target <= 1.0x)",
		"met    service shape, 64 goroutines: the best dsync row, dsync-rueidis, 16000 pairs/s = 1.60x redsync-redigo's (target >= 1.5x)",
		"MISSED service shape, 64 goroutines: the best dsync row, dsync-rueidis = 1.14x rueidislock's (target >= 1.2x)",
		"info   service shape, 64 goroutines: ping-redigo, the machine's limit over its client, 20000 pairs/s; the best dsync row reached 0.80x of it",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	var table strings.Builder
	r.writeShape(&table)
	if !strings.Contains(table.String(), "G=64, deadline") || !strings.Contains(table.String(), "dsync-rueidis") {
		t.Errorf("table:\n%s", &table)
	}

	// Without 64 goroutines the targets are not judged.
	r.Shape.Cells = map[ShapeKey][]ShapeCell{{shapeRedsyncRedigo, 16, "deadline"}: cells(1, 1)}
	out.Reset()
	r.writeTargets(&out)
	if got := out.String(); !strings.Contains(got, "the targets are at 64 goroutines, which this run did not measure") || strings.Contains(got, "service shape, 64") {
		t.Errorf("targets without 64 goroutines:\n%s", got)
	}
}
