package election_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/internal/testserver"
)

// A term's Done channel is made when first asked for: asked before the
// end, it is one channel that the end closes; asked after, it is closed;
// asked while the term ends, by many goroutines at once, every caller
// sees it closed once the term is over.
func TestTermDoneAskedBeforeDuringAndAfterTheEnd(t *testing.T) {
	srv := testserver.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := election.New(srv.NewBackend(t), "done", election.WithPrefix(prefix()))

	term, err := e.Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	before := term.Done()
	if isClosed(before) || term.Done() != before {
		t.Fatal("Done of a term that is on: closed, or a different channel each time")
	}
	if err := term.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if !isClosed(before) || !isClosed(term.Done()) {
		t.Errorf("after Resign: Done asked before closed %v, asked after closed %v; want both", isClosed(before), isClosed(term.Done()))
	}

	term, err = e.Campaign(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	got := make([]<-chan struct{}, 8)
	for i := range got {
		wg.Go(func() { got[i] = term.Done() })
	}
	if err := term.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, c := range got {
		if !isClosed(c) {
			t.Errorf("Done asked by goroutine %d while the term ended: open after Resign", i)
		}
	}
}
