-- dsync script library, prepended to every script by script.New.
-- Server time only: a client clock never reaches a stored deadline.

-- now returns the server time as whole milliseconds and microseconds.
local function now()
  local t = redis.call('TIME')
  local s, us = tonumber(t[1]), tonumber(t[2])
  return s * 1000 + math.floor(us / 1000), s * 1000000 + us
end

-- Waiter sets are sorted sets of waiter entries scored by the time the
-- entry expires, in ms. An entry starts with the waiter's address
-- ("hubid/waiterid", see package hub), which a primitive may follow with
-- '|' and what it needs to hand itself to that waiter. Entries are renewed
-- by each attempt of their waiter, so the entry with the lowest score is
-- the one that has gone longest without trying.

-- register adds or refreshes a waiter's entry, which expires after ttl ms.
local function register(waiters_key, entry, now_ms, ttl)
  redis.call('ZADD', waiters_key, now_ms + tonumber(ttl), entry)
  redis.call('PEXPIRE', waiters_key, ttl)
end

-- pop_waiter removes and returns the entry with the lowest score among
-- those not expired, with the server time it read (ms, µs), or false if
-- none is left. With no waiter set it costs one ZPOPMIN; when the first
-- entry has expired (its waiter died), every expired entry is dropped at
-- once.
local function pop_waiter(waiters_key)
  local e = redis.call('ZPOPMIN', waiters_key)
  if not e[1] then
    return false
  end
  local now_ms, now_us = now()
  if tonumber(e[2]) > now_ms then
    return e[1], now_ms, now_us
  end
  redis.call('ZREMRANGEBYSCORE', waiters_key, '-inf', now_ms)
  e = redis.call('ZPOPMIN', waiters_key)
  if e[1] and tonumber(e[2]) > now_ms then
    return e[1], now_ms, now_us
  end
  return false
end

-- wake publishes a wake-up for the waiter of entry on its process's
-- channel, channel_base/hubid; grant, unless nil, tells the waiter what
-- was handed to it.
local function wake(channel_base, entry, grant)
  local hub, id = string.match(entry, '^([^/|]+)/([^|]+)')
  if hub then
    if grant then
      id = id .. ' ' .. grant
    end
    redis.call('PUBLISH', channel_base .. '/' .. hub, id)
  end
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
