package core

import (
	"context"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/internal/codec"
	"github.com/dsyncgo/dsync/internal/wait"
)

// LockUnkept acquires as Lock does for a ctx without an owner, for a fresh
// owner that is also the hold's id, but keeps no lease: nothing renews the
// hold or tells of its end, and no handle remembers it. It lasts its lease
// on the server unless a script ends or extends it, and the caller hands
// its owner on (a semaphore's portable permit, released by that id from
// any process). It returns the owner and what the acquisition reported.
func (h *Handle) LockUnkept(ctx context.Context, s *LockSpec) (string, Grant, error) {
	if err := h.Begin(s.op(false), ctx); err != nil {
		return "", Grant{}, err
	}
	owner := dsync.NewID()
	a := &acquisition{h: h, s: s, owner: owner, op: owner, anon: true, ownerArg: owner, opArg: owner}
	a.plainArg = codec.PlainValue(owner, owner, s.Role, s.PlainFields...)
	err := wait.Acquire(ctx, wait.Spec{Channel: s.Channel, WaiterID: a.op, Heartbeat: s.Heartbeat, Logger: h.Cfg.Logger, Name: h.Name}, a)
	if err != nil {
		return "", Grant{}, h.Wrap(s.op(false), err)
	}
	return owner, a.got, nil
}
