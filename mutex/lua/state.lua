-- The lock key is one string, so that taking or freeing the mutex is one
-- SET with its expiry. While the mutex is held it reads
--
--   "<token> <count> <waiting> <owner> <ops>"
--
-- token: the hold's fencing token; count: the owner's hold count;
-- waiting: 0 only if no waiter can be registered (the hold was taken on a
-- key freed by a release that found none, and nobody registered since),
-- which spares its release a look at the waiter set, else 1; owner: the
-- owner id; ops: the recent operation ids (see seen).
--
-- Freed, it reads "<token>": the last token handed out, so that the next
-- one is one more without another read. It then expires after the fence
-- ttl. Every grant also writes its token to the fence key, for the fence
-- ttl, which outlives a hold whose lease runs out, a deleted lock key and
-- a server clock that steps back (a failover to a replica that lags). Only
-- when both keys are missing is the next token seeded from the server
-- clock in microseconds, which is greater than every earlier token unless
-- the clock stepped back: tokens grow by one per hold, and no two holds
-- start within a microsecond.

-- load reads the state of the mutex at lock: a table with token (a
-- string), count, waiting, owner and ops while held, with token alone
-- while free, empty when the key is missing.
local function load(lock)
  local v = redis.call('GET', lock)
  if not v then
    return {}
  end
  local token, count, waiting, owner, ops = string.match(v, '^(%d+) (%d+) ([01]) (%S+) ?(.*)$')
  if token then
    return {token = token, count = tonumber(count), waiting = waiting == '1', owner = owner, ops = ops}
  end
  if string.match(v, '^%d+$') then
    return {token = v}
  end
  return {}
end

-- store writes the held state s, expiring after ttl ms, or keeping the
-- key's expiry if ttl is nil.
local function store(lock, s, ttl)
  local v = s.token .. ' ' .. string.format('%d', s.count) .. ' ' .. (s.waiting and '1' or '0') .. ' ' .. s.owner .. ' ' .. s.ops
  if ttl then
    redis.call('SET', lock, v, 'PX', ttl)
  else
    redis.call('SET', lock, v, 'KEEPTTL')
  end
end

-- store_extending writes s like store, with its expiry set to ttl ms
-- unless it already expires later: a re-entry or partial release through
-- a handle with a shorter lease must not cut short a hold that its owner
-- keeps alive on a longer one.
local function store_extending(lock, s, ttl)
  if tonumber(ttl) > redis.call('PTTL', lock) then
    store(lock, s, ttl)
  else
    store(lock, s)
  end
end

-- next_token returns the fencing token of the hold that follows state s,
-- whose fence key is fence; now_us, if known, spares reading the clock.
local function next_token(s, fence, now_us)
  local last = s.token or redis.call('GET', fence)
  if last then
    return string.format('%d', tonumber(last) + 1)
  end
  if not now_us then
    local _
    _, now_us = now()
  end
  return string.format('%d', now_us)
end

-- grant writes the new hold s, expiring after ttl ms, and records its
-- token at fence for fence_ttl ms.
local function grant(lock, fence, s, ttl, fence_ttl)
  store(lock, s, ttl)
  redis.call('SET', fence, s.token, 'PX', fence_ttl)
end

-- free leaves only the last token of state s at lock, for fence_ttl ms.
local function free(lock, s, fence_ttl)
  if s.token then
    redis.call('SET', lock, s.token, 'PX', fence_ttl)
  else
    redis.call('DEL', lock)
  end
end
