-- acquire: take or re-enter the mutex.
-- KEYS[1] lock hash: {owner, count, token, ops} while held, {reserved}
-- while handed off (see hand_off); KEYS[2] waiter set; KEYS[3] fencing
-- counter.
-- ARGV[1] owner id; ARGV[2] operation id, the same on every retry of one
-- acquisition, so that a retry after a lost reply does not count twice;
-- ARGV[3] lease ms; ARGV[4] waiter address, '' not to register on failure;
-- ARGV[5] waiter entry ttl ms; ARGV[6] fencing counter ttl ms;
-- ARGV[7] '1' if an earlier attempt registered the waiter, to remove it;
-- ARGV[8] '1' if the waiter is starving (has waited long).
-- Reply: {1, hold count, token} when held by the owner;
-- {0, remaining ms of the current hold or of the reservation for another
-- waiter (-1 if it has no expiry)} otherwise.
local lock, waiters, fence = KEYS[1], KEYS[2], KEYS[3]
local owner, op, address = ARGV[1], ARGV[2], ARGV[4]

local function queue()
  if address ~= '' then
    local now_ms = now()
    register(waiters, address, now_ms, ARGV[5], ARGV[8] == '1')
  end
end

local h = redis.call('HMGET', lock, 'owner', 'ops', 'count', 'token', 'reserved')
local count, token
if h[1] == false and h[5] ~= false and h[5] ~= address then
  -- Handed off to another waiter: wait for the next release, or for the
  -- reservation to lapse if that waiter never comes.
  queue()
  return {0, redis.call('PTTL', lock)}
elseif h[1] == false then
  local _, now_us = now()
  count, token = 1, string.format('%d', next_token(fence, now_us, ARGV[6]))
  if h[5] ~= false then
    redis.call('HDEL', lock, 'reserved')
  end
  redis.call('HSET', lock, 'owner', owner, 'count', 1, 'token', token, 'ops', op)
  redis.call('PEXPIRE', lock, ARGV[3])
elseif h[1] == owner then
  count, token = tonumber(h[3]), h[4]
  if not seen(h[2], op) then
    count = count + 1
    redis.call('HSET', lock, 'count', count, 'ops', remember(h[2], op))
  end
  extend(lock, ARGV[3])
else
  queue()
  return {0, redis.call('PTTL', lock)}
end
if ARGV[7] == '1' then
  redis.call('ZREM', waiters, address)
end
return {1, count, token}
