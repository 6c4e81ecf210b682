-- dsync script library, prepended to every script by script.New.
-- Server time only: a client clock never reaches a stored deadline.

-- clock_ms and clock_us are the server time that now read, once per
-- script call: every part of a script then works at one instant, and
-- each further read would be one more command on the contended paths.
local clock_ms, clock_us

-- now returns the server time as whole milliseconds and microseconds, as
-- the script's first call of it read it.
local function now()
  if not clock_ms then
    local t = redis.call('TIME')
    local s, us = tonumber(t[1]), tonumber(t[2])
    clock_ms, clock_us = s * 1000 + math.floor(us / 1000), s * 1000000 + us
  end
  return clock_ms, clock_us
end

-- expire_at_least makes key expire ttl ms from now unless it already
-- lives longer: a key shared by entries of different lifetimes lives as
-- long as the longest. A ttl of 0 changes nothing (a renewal script's
-- check of a fixed lease).
local function expire_at_least(key, ttl)
  ttl = tonumber(ttl)
  if ttl > 0 and redis.call('PTTL', key) < ttl then
    redis.call('PEXPIRE', key, ttl)
  end
end

-- listed reports whether id is one of the space-separated ids of list.
local function listed(list, id)
  return id ~= nil and string.find(' ' .. list .. ' ', ' ' .. id .. ' ', 1, true) ~= nil
end

-- unexpected is the error reply for a key that holds something dsync did
-- not write there; callers report it as dsync.ErrUnexpectedReply.
local function unexpected(key, what)
  return redis.error_reply('DSYNC unexpected value at ' .. key .. ': ' .. tostring(what))
end

-- refused reports whether v, the reply of a write command called by
-- pcall, is an error other than a key of the wrong type: the server
-- refused the write (OOM under maxmemory, a read-only replica) and wrote
-- nothing, so that a script that went on must read the key again.
local function refused(v)
  return type(v) == 'table' and type(v.err) == 'string' and string.find(v.err, 'WRONGTYPE', 1, true) == nil
end

-- Operation ids make retries safe: an operation whose reply was lost is
-- retried with the same id, and a primitive applies an id once. The ids of
-- an owner's recent operations on a lock are kept with it, space-separated,
-- each as "<id>@<server time in s until which it is kept>", so that a
-- retry is still recognised when the same owner ran other operations
-- meanwhile. A release is retried for a few seconds at most (see
-- core.ReleaseTimeout): its id is kept op_memory seconds. An acquisition
-- is retried for as long as it waits, through outages: its id is kept a
-- lease and op_memory longer, past which the hold it re-entered cannot
-- have outlived an outage that kept its retry away. At most max_ops ids
-- are kept. The acquisition that starts a hold is kept without a time,
-- sparing the uncontended path a clock read, until max_ops later ones push
-- it out.
local op_memory, max_ops = 30, 128

-- seen reports whether op is among the ids ops (false for none).
local function seen(ops, op)
  return ops ~= false and ops ~= nil and string.find(ops, op, 1, true) ~= nil
end

-- remember returns ops with op added (or refreshed), kept keep seconds
-- after the server time now_s, and without the ids whose time is past.
local function remember(ops, op, now_s, keep)
  local out = {op .. '@' .. (now_s + keep)}
  for entry in string.gmatch(ops or '', '%S+') do
    if #out == max_ops then
      break
    end
    local id, till = string.match(entry, '^(%x+)@?(%d*)$')
    if id and id ~= op and (till == '' or tonumber(till) >= now_s) then
      out[#out + 1] = entry
    end
  end
  return table.concat(out, ' ')
end

-- acquisition_memory returns how long to keep the id of an acquisition
-- of a hold on a lease of lease_ms.
local function acquisition_memory(lease_ms)
  return op_memory + math.ceil(tonumber(lease_ms) / 1000)
end

-- forget returns ops without op.
local function forget(ops, op)
  local out = {}
  for entry in string.gmatch(ops or '', '%S+') do
    if string.sub(entry, 1, #op) ~= op then
      out[#out + 1] = entry
    end
  end
  return table.concat(out, ' ')
end

-- now_s returns the server time in whole seconds (see now).
local function now_s()
  return math.floor(now() / 1000)
end
