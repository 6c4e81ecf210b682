package dsyncgocron_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/dsyncgo/dsync/election"
	"github.com/dsyncgo/dsync/internal/testserver"
	"github.com/dsyncgo/dsync/mutex"

	dsyncgocron "github.com/dsyncgo/dsync/integrations/gocron"
)

// Every process runs the same scheduler; each run of a job happens in the
// one that takes the job's mutex.
func ExampleLocker() {
	b, stop := testserver.ExampleBackend() // in production: redigo.New(yourPool)
	defer stop()

	locker := dsyncgocron.NewLocker(b,
		dsyncgocron.WithMutexOptions(mutex.WithWatchdog(2*time.Second)), // a killed scheduler blocks the job 2s at most
		dsyncgocron.WithMinHold(700*time.Millisecond))                   // a scheduler's tick up to 0.7s late skips it
	s, err := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
	if err != nil {
		log.Fatal(err)
	}
	ran := make(chan int64)
	_, err = s.NewJob(gocron.DurationJob(time.Second), gocron.NewTask(func() {
		token, _ := locker.Token("report") // pass it with the job's writes
		ran <- token
	}), gocron.WithName("report"), gocron.WithStartAt(gocron.WithStartImmediately()))
	if err != nil {
		log.Fatal(err)
	}
	s.Start()
	fmt.Println("ran with a fencing token:", <-ran > 0)
	s.Shutdown()
	// Output: ran with a fencing token: true
}

// Every process runs the same scheduler; the one that leads the election
// runs every job, and another takes over when it stops.
func ExampleElector() {
	b, stop := testserver.ExampleBackend() // in production: redigo.New(yourPool)
	defer stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	el := dsyncgocron.NewElector(election.New(b, "scheduler", election.WithWatchdog(2*time.Second)), "host-a")
	done := make(chan error)
	go func() { done <- el.Run(ctx) }()
	s, err := gocron.NewScheduler(gocron.WithDistributedElector(el))
	if err != nil {
		log.Fatal(err)
	}
	ran := make(chan int64, 1)
	_, err = s.NewJob(gocron.DurationJob(100*time.Millisecond), gocron.NewTask(func() {
		tok, err := el.Term().Token(ctx) // the leader's fencing token
		if err != nil {
			return // the term ended as the job started
		}
		select {
		case ran <- tok:
		default:
		}
	}))
	if err != nil {
		log.Fatal(err)
	}
	s.Start()
	fmt.Println("the leader ran it, token issued:", <-ran > 0)
	s.Shutdown()
	cancel()
	<-done
	// Output: the leader ran it, token issued: true
}
