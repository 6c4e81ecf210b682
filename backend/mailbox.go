package backend

import (
	"context"
	"sync"
)

// DefaultMailboxSize is the number of undelivered messages a Mailbox keeps
// before it reports a gap instead.
const DefaultMailboxSize = 128

// Mailbox queues the messages of one subscription between an adapter's
// reader, which must never block, and a receiver, which may be slow. When
// the receiver falls behind by the mailbox's size, the queued messages are
// replaced by a single gap: the receiver learns it missed something and
// re-reads state, and memory stays bounded. A Mailbox is safe for
// concurrent use; its zero value is not usable, call NewMailbox.
type Mailbox struct {
	size  int
	ready chan struct{} // holds a token while the queue is non-empty or closed

	mu     sync.Mutex
	queue  []Message
	closed bool
}

// NewMailbox returns an empty mailbox that holds up to size messages;
// size <= 0 means DefaultMailboxSize.
func NewMailbox(size int) *Mailbox {
	if size <= 0 {
		size = DefaultMailboxSize
	}
	return &Mailbox{size: size, ready: make(chan struct{}, 1)}
}

// Put queues m without blocking. It reports false if the mailbox is closed.
func (b *Mailbox) Put(m Message) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	switch {
	case m.Gap:
		// Everything queued is subsumed by a gap: the receiver re-reads state.
		b.queue = append(b.queue[:0], Message{Channel: m.Channel, Gap: true})
	case len(b.queue) >= b.size:
		b.queue = append(b.queue[:0], Message{Channel: m.Channel, Gap: true})
	default:
		b.queue = append(b.queue, m)
	}
	b.signal()
	return true
}

func (b *Mailbox) signal() {
	select {
	case b.ready <- struct{}{}:
	default:
	}
}

// Receive returns the oldest queued message, waiting for one until ctx is
// done or the mailbox is closed, in which case it returns ErrClosed.
func (b *Mailbox) Receive(ctx context.Context) (Message, error) {
	for {
		b.mu.Lock()
		if b.closed {
			b.signal() // pass the wake-up on to the next receiver
			b.mu.Unlock()
			return Message{}, ErrClosed
		}
		if len(b.queue) > 0 {
			m := b.queue[0]
			b.queue[0] = Message{}
			b.queue = b.queue[1:]
			if len(b.queue) > 0 {
				b.signal()
			}
			b.mu.Unlock()
			return m, nil
		}
		b.mu.Unlock()
		select {
		case <-b.ready:
		case <-ctx.Done():
			return Message{}, ctx.Err()
		}
	}
}

// Close discards queued messages and wakes receivers, which return
// ErrClosed. It is idempotent.
func (b *Mailbox) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		b.queue = nil
		b.signal()
	}
}
