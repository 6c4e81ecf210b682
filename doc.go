// Package dsync holds the vocabulary shared by dsync's distributed
// synchronization primitives: the owner carried by a context, the sentinel
// errors every package returns, and the Locker interface that multilock
// composes.
//
// The primitives live in subpackages: mutex (reentrant mutex), and, as they
// land, rwlock, fairlock, semaphore and multilock. They all run over a
// backend.Backend, a small interface that any Redis client can implement;
// backend/redigo is the adapter shipped with the module.
//
// # Owners
//
// Go has no thread identity, and dsync does not fake one. An owner is a
// logical holder (a request, a job) carried by a context:
//
//	ctx = dsync.WithOwner(ctx)
//	mu.LockContext(ctx)   // acquired by the owner
//	mu.LockContext(ctx)   // re-entered: the hold count is now 2
//
// Every acquisition made with that ctx, or a ctx derived from it, belongs to
// the owner, so nested calls re-enter. A ctx without an owner acquires as a
// fresh owner each time, which makes it non-reentrant like sync.Mutex: a
// second LockContext blocks. An owner is meant to be used by one goroutine
// at a time, like a thread; goroutines that share an owner share its holds.
//
// Owner ids are random 128-bit values, unique without coordination; they are
// what the server stores as the holder.
package dsync
