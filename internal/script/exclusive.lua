-- The state of an exclusive hold (mutex, fairlock) is one string at the
-- primitive's main key, so that taking or freeing it is one SET with its
-- expiry. While held it reads
--
--   "<token> <count> <waiting> <owner> <hold id> <ops>"
--
-- token: the hold's fencing token (see fence.lua); count: the owner's hold
-- count; waiting: 0 only if no waiter can be registered (the hold was taken
-- on a key freed by a release that found none, and nobody registered
-- since), which spares its release a look at the waiters, else 1; owner:
-- the owner id; hold id: the id of the acquisition that started the hold,
-- unique across servers, which tells a process's handles on different
-- servers apart; ops: the recent operation ids (see seen).
--
-- Freed, it reads "<token> free": the last token handed out, so that the
-- next one is one more without another read, for the rest of the
-- released hold's lease (or, were a primitive to keep a fence key, for
-- the fence ttl; none does), after which its next token is seeded from
-- the server clock (see next_token). Anything else there was not written
-- by dsync, and is left alone.

-- decode reads the state at lock from v, the reply of a GET of it (by
-- pcall): a table with token (a string), count, waiting, owner, id and ops
-- while held, with token alone while free, empty when the key is missing,
-- and with foreign set when the key holds something else (see
-- unexpected).
local function decode(lock, v)
  if type(v) == 'table' then
    return {foreign = v.err}
  end
  if not v then
    return {}
  end
  local token, count, waiting, owner, id, ops = string.match(v, '^(%d+) (%d+) ([01]) (%S+) (%S+) ?(.*)$')
  if token then
    return {token = token, count = tonumber(count), waiting = waiting == '1', owner = owner, id = id, ops = ops}
  end
  token = string.match(v, '^(%d+) free$')
  if token then
    return {token = token}
  end
  -- Releases before the free marker left the bare token, always with an
  -- expiry; a bare number without one is someone else's.
  if string.match(v, '^%d+$') and redis.call('PTTL', lock) > 0 then
    return {token = v}
  end
  return {foreign = 'not a dsync state'}
end

-- load reads the state at lock (see decode).
local function load(lock)
  return decode(lock, redis.pcall('GET', lock))
end

-- store writes the held state s, expiring after ttl ms, or keeping the
-- key's expiry if ttl is nil.
local function store(lock, s, ttl)
  local v = s.token .. ' ' .. string.format('%d', s.count) .. ' ' .. (s.waiting and '1' or '0') .. ' ' .. s.owner .. ' ' .. s.id .. ' ' .. s.ops
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

-- grant writes the new hold s, expiring after ttl ms, and records its
-- token at fence, if the primitive has one, for fence_ttl ms.
local function grant(lock, fence, s, ttl, fence_ttl)
  store(lock, s, ttl)
  if fence then
    record_token(fence, s.token, fence_ttl)
  end
end

-- free leaves only the last token of state s at lock: for fence_ttl ms, or
-- without one for as long as the key had left.
local function free(lock, s, fence_ttl)
  if not s.token then
    redis.call('DEL', lock)
  elseif fence_ttl then
    redis.call('SET', lock, s.token .. ' free', 'PX', fence_ttl)
  else
    redis.call('SET', lock, s.token .. ' free', 'KEEPTTL')
  end
end

-- renew_holds extends many holds in one call (the lease scheduler's
-- batch): KEYS holds one main key per hold, ARGV[1] = keys per hold (1),
-- ARGV[2] = args per hold, then per hold its owner id, lease ms (0: only
-- check the hold, as for a fixed lease) and hold id. It replies per hold 1
-- if that very hold (owner and hold id) is still there and now expires no
-- sooner than its lease, else 0. A key that is not a dsync state costs
-- only its own hold.
local function renew_holds()
  local out, per = {}, tonumber(ARGV[2])
  for i = 1, #KEYS do
    local base = 2 + (i - 1) * per
    local s = load(KEYS[i])
    if s.owner == ARGV[base + 1] and s.id == ARGV[base + 3] then
      -- Never shorten a hold that a re-entry through a handle with a
      -- longer lease extended: the client counts on no script doing so.
      expire_at_least(KEYS[i], ARGV[base + 2])
      out[i] = 1
    else
      out[i] = 0
    end
  end
  return out
end

-- hand_off frees the primitive, whose state is s, and hands it to the
-- next waiter that pop (a function returning an entry, the server time in
-- ms and µs, or false) yields, if any: the main key becomes that waiter's
-- hold, with the next fencing token, for as long as the waiter asked. It
-- returns the waiter's address, token and owner id, or nothing. The waiter
-- learns it holds the primitive from its wake-up alone, without another
-- round trip: the caller wakes a waiter of its own hub (id hub) when the
-- reply arrives; a waiter elsewhere is woken by a message carrying the
-- token. If the wake-up is lost, the waiter's next
-- attempt finds the hold already its own. Without waiters only the token
-- is left (see free). A hold that no waiter registered behind (waiting 0)
-- is freed without a look at the waiters.
--
-- A waiter's entry is "<hubid>/<operation id>|<ttl ms>|<owner id>": the
-- hold it is handed counts as the acquisition with that operation id, so
-- that the waiter's retry, or its abandon, recognises it.
local function hand_off(lock, fence, s, channel, fence_ttl, hub, pop)
  if s.owner and not s.waiting then
    free(lock, s, fence_ttl)
    return
  end
  local w, _, now_us = pop()
  while w do
    local op, ttl, owner = string.match(w, '^[^/|]+/([^|]+)|(%d+)|(.*)$')
    if op then
      local token = next_token(s.token, fence, now_us)
      -- More waiters may be left: the next release looks again.
      grant(lock, fence, {token = token, count = 1, waiting = true, owner = owner, id = op, ops = op}, ttl, fence_ttl)
      if not local_to(w, hub) then
        wake(channel, w, token)
      end
      return string.match(w, '^[^|]+'), token, owner
    end
    w, _, now_us = pop() -- not a waiter's entry: skip it
  end
  free(lock, s, fence_ttl)
end
