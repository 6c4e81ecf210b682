package backend

// Queued returns how many calls wait in p's queue, for tests that must
// know that calls queued before they let a round trip end.
func Queued(p *Pipeline) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue)
}
