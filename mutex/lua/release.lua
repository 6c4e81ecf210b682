-- release: undo one hold of the owner; the last one frees the mutex and
-- wakes one waiter.
-- KEYS[1] lock hash; KEYS[2] waiter set.
-- ARGV[1] owner id; ARGV[2] operation id, the same on every retry of one
-- release, so that a retry after a lost reply does not release twice;
-- ARGV[3] lease ms, restored on a partial release; ARGV[4] wake channel.
-- Reply: the owner's remaining hold count, or -1 if the owner holds nothing.
local lock, waiters = KEYS[1], KEYS[2]
local owner, op = ARGV[1], ARGV[2]
if redis.call('HGET', lock, 'owner') ~= owner then
  return -1
end
if redis.call('HGET', lock, 'op') == op then
  return tonumber(redis.call('HGET', lock, 'count'))
end
local count = redis.call('HINCRBY', lock, 'count', -1)
if count > 0 then
  redis.call('HSET', lock, 'op', op)
  redis.call('PEXPIRE', lock, ARGV[3])
  return count
end
redis.call('DEL', lock)
local now_ms = now()
wake_next(waiters, ARGV[4], now_ms)
return 0
