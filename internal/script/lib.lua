-- dsync script library, prepended to every script by script.New.
-- Server time only: a client clock never reaches a stored deadline.

-- now returns the server time as whole milliseconds and microseconds.
local function now()
  local t = redis.call('TIME')
  local s, us = tonumber(t[1]), tonumber(t[2])
  return s * 1000 + math.floor(us / 1000), s * 1000000 + us
end

-- expire_at_least makes key expire ttl ms from now unless it already
-- lives longer: a key shared by entries of different lifetimes lives as
-- long as the longest.
local function expire_at_least(key, ttl)
  local left = redis.call('PTTL', key)
  if left ~= -1 and left < tonumber(ttl) then
    redis.call('PEXPIRE', key, ttl)
  end
end

-- A waiter's entry starts with its address ("hubid/waiterid", see package
-- hub), which a primitive may follow with '|' and what it needs to hand
-- itself to that waiter.

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

-- unexpected is the error reply for a key that holds something dsync did
-- not write there; callers report it as dsync.ErrUnexpectedReply.
local function unexpected(key, what)
  return redis.error_reply('DSYNC unexpected value at ' .. key .. ': ' .. tostring(what))
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
