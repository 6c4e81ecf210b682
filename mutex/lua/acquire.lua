-- acquire: take or re-enter the mutex.
-- KEYS[1] lock hash {owner, count, token, ops}; KEYS[2] waiter set;
-- KEYS[3] fencing counter.
-- ARGV[1] owner id; ARGV[2] operation id, the same on every retry of one
-- acquisition, so that a retry after a lost reply does not count twice;
-- ARGV[3] lease ms; ARGV[4] waiter entry (see hand_off), '' not to
-- register on failure; ARGV[5] waiter entry ttl ms; ARGV[6] fencing
-- counter ttl ms; ARGV[7] '1' if an earlier attempt registered the waiter,
-- to remove it.
-- Reply: {1, hold count, token} when held by the owner; {0, remaining ms
-- of the current hold (-1 if it has no expiry)} otherwise.
local lock, waiters, fence = KEYS[1], KEYS[2], KEYS[3]
local owner, op, entry = ARGV[1], ARGV[2], ARGV[4]

local h = redis.call('HMGET', lock, 'owner', 'ops', 'count', 'token')
local count, token
if h[1] == false then
  local _, now_us = now()
  count, token = 1, string.format('%d', next_token(fence, now_us, ARGV[6]))
  redis.call('HSET', lock, 'owner', owner, 'count', 1, 'token', token, 'ops', op)
  redis.call('PEXPIRE', lock, ARGV[3])
elseif h[1] == owner then
  -- A re-entry, a retry whose first reply was lost, or a waiter's attempt
  -- after a hand-off to it (see hand_off).
  count, token = tonumber(h[3]), h[4]
  if not seen(h[2], op) then
    count = count + 1
    redis.call('HSET', lock, 'count', count, 'ops', remember(h[2], op))
  end
  extend(lock, ARGV[3])
else
  if entry ~= '' then
    register(waiters, entry, now(), ARGV[5])
  end
  return {0, redis.call('PTTL', lock)}
end
if ARGV[7] == '1' then
  redis.call('ZREM', waiters, entry)
end
return {1, count, token}
