// Package owner carries an owner id in a context: dsync.WithOwner and
// dsync.OwnerFrom, and the primitives that keep an owner's context past
// its caller's cancellation (Detach).
package owner

import "context"

type key struct{}

// With returns a copy of ctx that carries the owner id.
func With(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, key{}, id)
}

// From reports the owner id ctx carries, if any.
func From(ctx context.Context) (id string, ok bool) {
	id, ok = ctx.Value(key{}).(string)
	return id, ok
}

// Detach returns ctx without its cancellation or deadline
// (context.WithoutCancel), with its owner, if any, found without walking
// through it: a lookup that reaches a context.WithoutCancel allocates, and
// an owner's context kept for its later calls is asked for its owner by
// each of them.
func Detach(ctx context.Context) context.Context {
	d := context.WithoutCancel(ctx)
	if id, ok := From(ctx); ok {
		return With(d, id)
	}
	return d
}
