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

-- Operation ids make retries safe: an operation whose reply was lost is
-- retried with the same id, and a primitive applies an id once. A few
-- recent ids are kept per lock, space-separated, so that a retry is still
-- recognised when the same owner ran other operations meanwhile.
local recent_ops = 8

-- seen reports whether op is among the recent ids ops (false for none).
local function seen(ops, op)
  return ops ~= false and ops ~= nil and string.find(ops, op, 1, true) ~= nil
end

-- remember returns ops with op added and the oldest beyond recent_ops gone.
local function remember(ops, op)
  local out, n = op, 1
  if ops then
    for id in string.gmatch(ops, '%S+') do
      if n == recent_ops then
        break
      end
      out, n = out .. ' ' .. id, n + 1
    end
  end
  return out
end

-- forget returns ops without op.
local function forget(ops, op)
  local out = {}
  for id in string.gmatch(ops or '', '%S+') do
    if id ~= op then
      out[#out + 1] = id
    end
  end
  return table.concat(out, ' ')
end

-- extend sets key's expiry to ttl ms unless it already expires later: a
-- re-entry or partial release through a handle with a shorter lease must
-- not cut short a hold that its owner keeps alive on a longer one.
local function extend(key, ttl)
  if tonumber(ttl) > redis.call('PTTL', key) then
    redis.call('PEXPIRE', key, ttl)
  end
end

