// Package dsyncgocron runs go-co-op/gocron v2 jobs across processes on
// dsync: a Locker (gocron.WithDistributedLocker) on package mutex, which
// runs each job where its mutex was taken, and an Elector
// (gocron.WithDistributedElector) on package election, which runs every
// job on the scheduler that leads.
//
// It is a module of its own, so that gocron stays out of the graph of a
// dsync user who does not use it.
//
// # Which one
//
// The Elector is the simpler guarantee: one scheduler runs everything,
// whatever the schedulers' clocks, and another takes over when it dies.
// Make its jobs singletons (gocron.WithSingletonMode), or a run that
// outlasts its interval overlaps the next, in the same scheduler.
// The Locker spreads jobs over schedulers, one run at a time per job; it
// runs each tick once only if the schedulers' ticks fall together (start
// duration jobs at a common time, gocron.WithStartAt) and, for jobs
// quicker than the schedulers' skew, with WithMinHold.
//
// # Leases
//
// A scheduler killed while running a job (Locker) or while leading
// (Elector) stops that job everywhere until its lease runs out: 30s by
// default. Choose the lease for the gap you can afford, not for the job's
// length: the watchdog renews it every third of the lease while the job
// runs, however long. A fixed lease (mutex.WithLease) suits only jobs
// that finish well within it.
//
// # Fencing
//
// A lease is not a guarantee: a scheduler paused past its lease (GC, a
// partition) may still be running a job while another starts it. Pass
// the fencing token (Locker.Token, Elector.Term().Token(ctx)) with every
// write the job makes, and have the resource refuse a token lower than
// the highest it has seen.
package dsyncgocron
