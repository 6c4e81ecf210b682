package backend

import (
	"context"
	"sync"
)

// EventQueue carries the events of one PubSubConn from a client that
// hands them to callbacks, on the goroutine that reads the connection, to
// the Mux's Receive. Push never blocks, so a callback never stalls the
// client's reader, even while the Mux waits on that reader (a client whose
// SUBSCRIBE waits for its confirmation). The queue is unbounded: the Mux
// drains it as fast as events arrive, and a slow subscriber's messages go
// to its Mailbox, not here.
//
// The zero value is not usable; call NewEventQueue.
type EventQueue struct {
	ready chan struct{} // holds a token while the queue may be non-empty

	mu     sync.Mutex
	events []PubSubEvent
}

// NewEventQueue returns an empty queue.
func NewEventQueue() *EventQueue {
	return &EventQueue{ready: make(chan struct{}, 1)}
}

// Push queues ev.
func (q *EventQueue) Push(ev PubSubEvent) {
	q.mu.Lock()
	q.events = append(q.events, ev)
	q.mu.Unlock()
	q.signal()
}

// Receive returns the oldest event, waiting for one until ctx is done or
// lost delivers (the connection ended: Receive returns what it delivers,
// or ErrClosed once it is closed), as PubSubConn.Receive does.
func (q *EventQueue) Receive(ctx context.Context, lost <-chan error) (PubSubEvent, error) {
	for {
		q.mu.Lock()
		if len(q.events) > 0 {
			ev := q.events[0]
			q.events[0] = PubSubEvent{}
			q.events = q.events[1:]
			if len(q.events) > 0 {
				q.signal()
			}
			q.mu.Unlock()
			return ev, nil
		}
		q.mu.Unlock()
		select {
		case <-q.ready:
		case err := <-lost:
			if err == nil {
				err = ErrClosed
			}
			return PubSubEvent{}, err
		case <-ctx.Done():
			return PubSubEvent{}, ctx.Err()
		}
	}
}

func (q *EventQueue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}
