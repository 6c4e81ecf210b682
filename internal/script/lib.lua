-- dsync script library, prepended to every script by script.New.
-- Server time only: a client clock never reaches a stored deadline.

-- now returns the server time as whole milliseconds and microseconds.
local function now()
  local t = redis.call('TIME')
  local s, us = tonumber(t[1]), tonumber(t[2])
  return s * 1000 + math.floor(us / 1000), s * 1000000 + us
end

-- next_token returns a fencing token greater than every token handed out
-- for fence_key: the counter plus one, or the server time in microseconds
-- when that is larger, so the sequence keeps increasing even if the counter
-- key is lost. The counter lives for fence_ttl milliseconds.
local function next_token(fence_key, now_us, fence_ttl)
  local last = tonumber(redis.call('GET', fence_key) or '0') or 0
  local token
  if last < now_us then
    token = now_us
    redis.call('SET', fence_key, string.format('%d', token), 'PX', fence_ttl)
  else
    token = redis.call('INCR', fence_key)
    redis.call('PEXPIRE', fence_key, fence_ttl)
  end
  return token
end

-- wake_next drops expired entries from the waiter set and wakes the waiter
-- that has gone longest without renewing its entry, removing it: a live
-- waiter that loses the race re-registers with its next attempt.
local function wake_next(waiters_key, channel, now_ms)
  redis.call('ZREMRANGEBYSCORE', waiters_key, '-inf', now_ms)
  local w = redis.call('ZPOPMIN', waiters_key)
  if w[1] then
    redis.call('PUBLISH', channel, w[1])
  end
end

-- register adds or refreshes a waiter entry that expires after ttl ms.
local function register(waiters_key, id, now_ms, ttl)
  redis.call('ZADD', waiters_key, now_ms + tonumber(ttl), id)
  redis.call('PEXPIRE', waiters_key, ttl)
end

