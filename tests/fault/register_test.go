package fault

import (
	"context"
	"fmt"

	"github.com/gomodule/redigo/redis"
)

// register is the resource the locks protect in the fault tests: a value
// on a server of its own that accepts an operation only with a fencing
// token no lower than the highest it has seen, as DESIGN.md asks of a
// protected resource. A read raises the fence too, so that a holder paused
// between its read and its write cannot overwrite a later holder's update.
type register struct {
	addr string
	key  string
}

// fencedOp: KEYS[1] the register's hash; ARGV[1] "r" or "w"; ARGV[2] the
// fencing token; ARGV[3] the value to write. Reply: {1, value after} if
// accepted, {0, highest token} if the token is below the highest seen.
var fencedOp = redis.NewScript(1, `
local hi = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
local tok = tonumber(ARGV[2])
if tok < hi then
  return {0, hi}
end
redis.call('HSET', KEYS[1], 'fence', ARGV[2])
if ARGV[1] == 'w' then
  redis.call('HSET', KEYS[1], 'value', ARGV[3])
  redis.call('HINCRBY', KEYS[1], 'writes', 1)
end
return {1, tonumber(redis.call('HGET', KEYS[1], 'value') or '0')}
`)

func (r register) op(ctx context.Context, kind string, token, value int64) (accepted bool, v int64, err error) {
	c, err := redis.DialContext(ctx, "tcp", r.addr)
	if err != nil {
		return false, 0, err
	}
	defer c.Close()
	reply, err := redis.Int64s(fencedOp.DoContext(ctx, c, r.key, kind, token, value))
	if err != nil {
		return false, 0, err
	}
	if len(reply) != 2 {
		return false, 0, fmt.Errorf("register: reply %v", reply)
	}
	return reply[0] == 1, reply[1], nil
}

// Read reads the value under token, raising the fence to it.
func (r register) Read(ctx context.Context, token int64) (bool, int64, error) {
	return r.op(ctx, "r", token, 0)
}

// Write writes v under token.
func (r register) Write(ctx context.Context, token, v int64) (bool, error) {
	ok, _, err := r.op(ctx, "w", token, v)
	return ok, err
}

// Totals returns the value and the count of accepted writes.
func (r register) Totals(ctx context.Context) (value, writes int64, err error) {
	c, err := redis.DialContext(ctx, "tcp", r.addr)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	vs, err := redis.Values(c.Do("HMGET", r.key, "value", "writes"))
	if err != nil || len(vs) != 2 {
		return 0, 0, fmt.Errorf("register: %v %v", vs, err)
	}
	if vs[0] != nil {
		value, _ = redis.Int64(vs[0], nil)
	}
	if vs[1] != nil {
		writes, _ = redis.Int64(vs[1], nil)
	}
	return value, writes, nil
}
