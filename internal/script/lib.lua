-- dsync script library, prepended to every script by script.New.
-- Server time only: a client clock never reaches a stored deadline.

-- now returns the server time as whole milliseconds and microseconds.
local function now()
  local t = redis.call('TIME')
  local s, us = tonumber(t[1]), tonumber(t[2])
  return s * 1000 + math.floor(us / 1000), s * 1000000 + us
end

-- next_token returns a fencing token greater than every token handed out
-- for fence_key: the server time in microseconds, or the previous token
-- plus one when that is not smaller, so the sequence keeps increasing even
-- if the counter key is lost, and even if the clock steps back while the
-- key lives. The counter lives for fence_ttl milliseconds. One call in the
-- usual case (SET ... GET, Redis 6.2+).
local function next_token(fence_key, now_us, fence_ttl)
  local token = now_us
  local last = tonumber(redis.call('SET', fence_key, string.format('%d', token), 'PX', fence_ttl, 'GET') or '0') or 0
  if last >= token then
    token = last + 1
    redis.call('SET', fence_key, string.format('%d', token), 'PX', fence_ttl)
  end
  return token
end

-- wake_next drops expired entries from the waiter set, then wakes the
-- waiter that has gone longest without renewing its entry, removing it (a
-- live waiter that does not get what it waits for registers again), and
-- returns its id, or false if there is none. With no waiter set it costs
-- one EXISTS.
local function wake_next(waiters_key, channel)
  if redis.call('EXISTS', waiters_key) == 0 then
    return false
  end
  local now_ms = now()
  redis.call('ZREMRANGEBYSCORE', waiters_key, '-inf', now_ms)
  local w = redis.call('ZPOPMIN', waiters_key)
  if w[1] then
    redis.call('PUBLISH', channel, w[1])
    return w[1]
  end
  return false
end

-- register adds or refreshes a waiter entry that expires after ttl ms.
local function register(waiters_key, id, now_ms, ttl)
  redis.call('ZADD', waiters_key, now_ms + tonumber(ttl), id)
  redis.call('PEXPIRE', waiters_key, ttl)
end

