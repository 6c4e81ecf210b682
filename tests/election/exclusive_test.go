package election_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/election"
)

// Six candidates on separate backends campaign in a loop for 5s, each
// leading for 0–20ms and resigning: no two terms are ever open at once,
// tokens strictly increase, and leadership goes round fairly (FIFO).
func TestOneLeaderAtATimeAndFairTurns(t *testing.T) {
	for name, open := range servers(false) {
		t.Run(name, func(t *testing.T) {
			const candidates, run = 6, 5 * time.Second
			srv := open(t)
			ctx, cancel := context.WithTimeout(context.Background(), run+30*time.Second)
			defer cancel()
			p := prefix()
			var (
				mu     sync.Mutex
				terms  [candidates]*election.Term
				tokens [candidates]int64 // terms' tokens
				last   int64
				led    [candidates]int
				bad    int
			)
			stop := time.Now().Add(run)
			var wg sync.WaitGroup
			for i := range candidates {
				e := election.New(srv.NewBackend(t), "exclusive", election.WithPrefix(p))
				wg.Add(1)
				go func() {
					defer wg.Done()
					for n := 0; time.Now().Before(stop) && n < 100000; n++ {
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
								bad++
								t.Errorf("candidate %d leads (token %d) while candidate %d's term (token %d) is open", i, tok, j, tokens[j])
							}
						}
						if tok <= last {
							bad++
							t.Errorf("candidate %d's token %d after %d", i, tok, last)
						}
						last, terms[i], tokens[i] = tok, term, tok
						led[i]++
						mu.Unlock()
						time.Sleep(rand.N(20 * time.Millisecond))
						if err := term.Resign(ctx); err != nil {
							t.Errorf("candidate %d: resign: %v", i, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			var sum, squares float64
			total := 0
			for _, n := range led {
				sum += float64(n)
				squares += float64(n) * float64(n)
				total += n
			}
			jain := sum * sum / (candidates * squares)
			t.Logf("%d terms in %v: per candidate %v, Jain's fairness %.4f, violations %d", total, run, led, jain, bad)
			for i, n := range led {
				if n == 0 {
					t.Errorf("candidate %d never led", i)
				}
			}
			if jain < 0.95 {
				t.Errorf("Jain's fairness over leaderships %.4f; want at least 0.95", jain)
			}
		})
	}
}
