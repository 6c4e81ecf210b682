-- release: undo one hold of the owner; the last one frees the mutex and
-- hands it to the next waiter (see hand_off).
-- KEYS[1] lock hash; KEYS[2] waiter set; KEYS[3] fencing counter.
-- ARGV[1] owner id; ARGV[2] operation id, the same on every retry of one
-- release, so that a retry after a lost reply does not release twice;
-- ARGV[3] lease ms, restored on a partial release; ARGV[4] wake channel
-- base; ARGV[5] fencing counter ttl ms; ARGV[6] the caller's process id
-- (see hand_off); ARGV[7] waiter entry ttl ms; ARGV[8...] entries of
-- waiters of the caller's process queued behind this hold (see
-- mutex/local.go), registered in order before anything else.
-- Reply: {the owner's remaining hold count, or -1 if the owner holds
-- nothing}, followed by the waiter's address, token and owner id when the
-- mutex was handed to a waiter, which the caller wakes if it is in its
-- process.
local lock, waiters = KEYS[1], KEYS[2]
local owner, op = ARGV[1], ARGV[2]
local h = redis.call('HMGET', lock, 'owner', 'ops', 'count')
if #ARGV > 7 then
  local now_ms = now()
  local expiry = now_ms + tonumber(ARGV[7])
  for i = 8, #ARGV do
    -- Thousandths of a ms keep arrival order among equal expiries.
    redis.call('ZADD', waiters, string.format('%.3f', expiry + (i - 8) / 1000), ARGV[i])
  end
  redis.call('PEXPIRE', waiters, ARGV[7])
  if h[1] == false then
    -- The hold is gone (its lease ran out): nobody else would wake them.
    return {-1, hand_off(lock, waiters, KEYS[3], ARGV[4], ARGV[5], ARGV[6])}
  end
end
if h[1] ~= owner then
  return {-1}
end
local count = tonumber(h[3])
if seen(h[2], op) then
  return {count}
end
if count > 1 then
  redis.call('HSET', lock, 'count', count - 1, 'ops', remember(h[2], op))
  extend(lock, ARGV[3])
  return {count - 1}
end
return {0, hand_off(lock, waiters, KEYS[3], ARGV[4], ARGV[5], ARGV[6])}
