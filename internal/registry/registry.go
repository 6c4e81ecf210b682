// Package registry keeps one value per backend: dsync runs one lease
// scheduler and one pub/sub hub per backend value, shared by every
// primitive on it, and forgets them when they fall idle.
package registry

import (
	"sync"

	"github.com/dsyncgo/dsync/backend"
)

// Registry maps backends to values of type T. The zero value is ready to
// use.
type Registry[T any] struct {
	mu sync.Mutex
	m  map[backend.Backend]T
}

// Do runs f on b's value, made with create if b has none. If f reports
// idle, the value is forgotten. f runs with the registry locked, so that
// no other Do can revive a value that f is retiring.
func (r *Registry[T]) Do(b backend.Backend, create func() T, f func(T) (idle bool)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.m[b]
	if !ok {
		if create == nil {
			return
		}
		v = create()
		if r.m == nil {
			r.m = make(map[backend.Backend]T)
		}
		r.m[b] = v
	}
	if f(v) {
		delete(r.m, b)
	}
}
