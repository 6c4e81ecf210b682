-- acquire: take or re-enter the mutex.
-- KEYS[1] lock hash {owner, count, token, op}; KEYS[2] waiter set;
-- KEYS[3] fencing counter.
-- ARGV[1] owner id; ARGV[2] operation id, the same on every retry of one
-- acquisition, so that a retry after a lost reply does not count twice;
-- ARGV[3] lease ms; ARGV[4] waiter id, '' not to register on failure;
-- ARGV[5] waiter entry ttl ms; ARGV[6] fencing counter ttl ms.
-- Reply: {1, hold count, token} when held by the owner;
-- {0, remaining ms of the current hold (-1 if it has no expiry)} otherwise.
local lock, waiters, fence = KEYS[1], KEYS[2], KEYS[3]
local owner, op = ARGV[1], ARGV[2]
local now_ms, now_us = now()
local holder = redis.call('HGET', lock, 'owner')
if holder == false then
  local token = next_token(fence, now_us, ARGV[6])
  redis.call('HSET', lock, 'owner', owner, 'count', 1,
    'token', string.format('%d', token), 'op', op)
elseif holder == owner then
  if redis.call('HGET', lock, 'op') ~= op then
    redis.call('HINCRBY', lock, 'count', 1)
    redis.call('HSET', lock, 'op', op)
  end
else
  if ARGV[4] ~= '' then
    register(waiters, ARGV[4], now_ms, ARGV[5])
  end
  return {0, redis.call('PTTL', lock)}
end
redis.call('PEXPIRE', lock, ARGV[3])
if ARGV[4] ~= '' then
  redis.call('ZREM', waiters, ARGV[4])
end
local h = redis.call('HMGET', lock, 'count', 'token')
return {1, tonumber(h[1]), h[2]}
