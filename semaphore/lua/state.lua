-- The state of a semaphore (package semaphore), prepended to each of its
-- scripts after the shared queue library. Every script but renew names the
-- same keys, in this order:
--
--   KEYS[1] the state, in one of two forms (below)
--   KEYS[2] holders: the shared form's leases
--   KEYS[3] queue, KEYS[4] expiry: the FIFO waiter queue (see queue.lua),
--       entries asking for "<permits>|<lease ms>" (see codec.lua)
--   KEYS[5] capacity: the capacity set at runtime (SetCapacity), if any;
--       it has no expiry and overrides every handle's
--
-- The single form, while at most one owner holds permits, no waiter is
-- queued and no capacity is set at runtime, is one string at KEYS[1], so
-- that a lone holder takes the semaphore with one SET NX and frees it with
-- one DEL, as the mutex does:
--
--   "<owner> <hold id> <permits> <cap>"  the plain form (see codec.lua),
--       held by owner for one acquisition, taken by a SET NX of a missing
--       KEYS[1] (by the client, or by the acquire script's fast path); its
--       grant counter is not drawn yet
--   "<grant> <cap> <permits> <owner> <hold id> <ops>"  held by owner; the
--       key expires with the owner's lease, so that its end needs no
--       server time; cap is the capacity of the handles that made the
--       state ('o' where earlier versions marked a capacity set at
--       runtime)
--   ("<grant> free", "<grant> free o"  free, as earlier versions left it)
--
-- A missing KEYS[1] is free, and promises what a plain SET NX of it takes
-- for granted: no permit is held (holders left without the state lost
-- theirs, see sem_purge), no live waiter is queued, and no capacity is
-- set at runtime. Every script keeps that so:
--
--   - every waiter that queues turns a single form into the shared one
--     first, and each enqueue (a registration, or a heartbeat) makes the
--     hash live at least as long as the entry, plus 2ms: an entry expires
--     by TIME, read early in the script, in whole ms, and a key's expiry
--     set in the same script counts from the server's clock at the command
--     (before Redis 7.2) or at the script's start (since), at most the
--     script's run earlier;
--   - while a capacity is set at runtime the state is the shared form,
--     without expiry (the leases end through holders), kept when every
--     permit is free; SetCapacity turns a single form into it, and
--     SetCapacity(0) gives the hash back an expiry as long as its holders
--     and waiters need, or deletes it if the semaphore is free.
--
-- Only a key deleted or evicted behind dsync's back breaks it: then one
-- plain SET NX may pass a live waiter, or go by the handle's capacity,
-- until a script finds the queue or the capacity key and writes the state
-- again.
--
-- The shared form, from when a second owner holds, a waiter queues or a
-- capacity is set at runtime until every permit is free again with nobody
-- queued and no capacity set at runtime, when the keys are deleted:
--
--   KEYS[1] hash:
--       cap    the capacity of the handles that created the state
--       used   the permits held, by every owner together
--       grant  the grant counter (below)
--       <owner id>  "<permits> <hold id> <ops>" for each owner holding
--              permits: how many, the id of the acquisition that started
--              its hold, and its recent operation ids (see seen)
--   KEYS[2] holders: sorted set of owner ids by the server time, in ms, at
--       which their lease ends; an owner past it is purged (its permits
--       return) by the next script that looks, in O(log n)
--
-- The hash expires no sooner than the latest lease and the latest waiter's
-- entry, so that it vanishes when every holder and waiter died, unless a
-- capacity is set at runtime: then it has no expiry. Holders expire no
-- sooner than the latest lease.
--
-- The grant counter grows with every grant, so that a waiter can tell a
-- hand-off newer than its last failed attempt (see package wait); it is
-- drawn as a fencing token is (see fence.lua).

-- sem_keys returns the keys of the script; kept, unknown (nil) until
-- sem_override reads the capacity key, says whether the state is kept
-- without expiry for a capacity set at runtime.
local function sem_keys()
  return {hash = KEYS[1], holders = KEYS[2], queue = KEYS[3], expiry = KEYS[4], cap = KEYS[5]}
end

-- sem_load reads the shared form's state: cap (the state's capacity, nil
-- if there is no state), used, grant (a string or nil), and queued
-- (unknown, nil, until sem_dispatch or the caller sets it: whether a live
-- waiter is queued). A key that dsync did not write fails the script
-- before any write: callers read the holders (sem_purge) before they
-- write too. The runtime capacity is read apart (sem_override).
local function sem_load(k)
  local v = redis.call('HMGET', k.hash, 'cap', 'used', 'grant')
  local st = {cap = tonumber(v[1]), used = tonumber(v[2]) or 0, grant = v[3] or nil}
  if (v[1] and not st.cap) or (v[2] and not tonumber(v[2])) or (not v[1] and redis.call('EXISTS', k.hash) == 1) then
    error('DSYNC unexpected value at ' .. k.hash .. ': not a semaphore state')
  end
  return st
end

-- sem_override returns the capacity set at runtime, or nil, and records
-- in k whether the state is kept for it (see sem_keys).
local function sem_override(k)
  local o = redis.call('GET', k.cap)
  if o and not tonumber(o) then
    error('DSYNC unexpected value at ' .. k.cap .. ': not a capacity')
  end
  k.kept = o ~= false
  return tonumber(o)
end

-- sem_single decodes v, the string at KEYS[1], as the single form: a
-- table with grant (a string, nil in the plain form), override (true if
-- marked 'o') and, when held, held = true, cap (nil if 'o'), permits,
-- owner, id and ops; nil if v is not a semaphore's.
local function sem_single(v)
  local owner, id, p, c = string.match(v, '^(%x+) (%x+) (%d+) (%d+)$')
  if owner then
    return {held = true, cap = tonumber(c), permits = tonumber(p), owner = owner, id = id, ops = id, plain = true}
  end
  local g, c, p, owner, id, ops = string.match(v, '^(%d+) (%w+) (%d+) (%S+) (%S+) ?(.*)$')
  if g and (c == 'o' or string.match(c, '^%d+$')) then
    return {grant = g, held = true, cap = tonumber(c), override = c == 'o', permits = tonumber(p), owner = owner, id = id, ops = ops}
  end
  g = string.match(v, '^(%d+) free$')
  if g then
    return {grant = g}
  end
  g = string.match(v, '^(%d+) free o$')
  if g then
    return {grant = g, override = true}
  end
  return nil
end

-- sem_single_value returns the string of the single form s, a plain one
-- drawing its grant counter.
local function sem_single_value(s)
  s.grant = s.grant or next_token(nil)
  if not s.held then
    return s.grant .. (s.override and ' free o' or ' free')
  end
  local c = s.override and 'o' or string.format('%d', s.cap)
  return s.grant .. ' ' .. c .. ' ' .. string.format('%d', s.permits) .. ' ' .. s.owner .. ' ' .. s.id .. ' ' .. s.ops
end

-- sem_single_store writes the single form s, expiring after ttl ms, or
-- keeping the key's expiry if ttl is nil.
local function sem_single_store(k, s, ttl)
  if ttl then
    redis.call('SET', k.hash, sem_single_value(s), 'PX', ttl)
  else
    redis.call('SET', k.hash, sem_single_value(s), 'KEEPTTL')
  end
end

-- sem_single_extend makes the single form's hold expire no sooner than
-- ttl ms from now, and returns the ms it has left.
local function sem_single_extend(k, ttl)
  local pt = redis.call('PTTL', k.hash)
  ttl = tonumber(ttl)
  if ttl > pt then
    redis.call('PEXPIRE', k.hash, ttl)
    return ttl
  end
  return pt
end

-- sem_open reads the state at KEYS[1], whose GET (by pcall) replied v,
-- for a script that needs the shared form, into which it turns a single
-- form s (if not nil): the holder's lease ends when the key would have
-- expired. It returns the shared state (see sem_load), a free single
-- form's grant counter included. hcap is the state's capacity if s has
-- none.
local function sem_open(k, v, s, hcap, now_ms)
  if not s then
    if type(v) == 'string' then
      error('DSYNC unexpected value at ' .. k.hash .. ': not a semaphore state')
    end
    if not v and redis.call('ZCARD', k.holders) > 0 then
      -- No state: the leases holders still lists are of permits lost
      -- with it (see sem_purge), which must not count beside the state
      -- this script may write. The queue and its expiry, which the
      -- caller may read or write after this, are read first: a key dsync
      -- did not write fails the script before this write (WRONGTYPE), as
      -- holders does at its ZCARD.
      redis.call('ZCARD', k.queue)
      redis.call('ZCARD', k.expiry)
      redis.call('DEL', k.holders)
    end
    return sem_load(k)
  end
  redis.call('ZRANGE', k.holders, 0, 0) -- WRONGTYPE before any write
  local pt = redis.call('PTTL', k.hash)
  -- The single form says that nobody else holds: the leases holders
  -- still lists are of permits lost with a shared state before it.
  redis.call('DEL', k.hash, k.holders)
  if not s.held or pt <= 0 then
    return {used = 0, grant = s.grant}
  end
  local cap = s.cap or tonumber(hcap)
  s.grant = s.grant or next_token(nil)
  redis.call('HSET', k.hash, 'cap', cap, 'used', s.permits, 'grant', s.grant,
    s.owner, string.format('%d', s.permits) .. ' ' .. s.id .. ' ' .. s.ops)
  redis.call('ZADD', k.holders, now_ms + pt, s.owner)
  redis.call('PEXPIRE', k.hash, pt)
  redis.call('PEXPIRE', k.holders, pt)
  return {cap = cap, used = s.permits, grant = s.grant}
end

-- sem_limit returns the capacity in force.
local function sem_limit(st, handle_cap)
  return st.override or st.cap or tonumber(handle_cap)
end

-- sem_holder returns the entry of owner: a table with owner, permits, id
-- and ops, or nil.
local function sem_holder(k, owner)
  local v = redis.call('HGET', k.hash, owner)
  if not v then
    return nil
  end
  local p, id, ops = string.match(v, '^(%d+) (%S+) ?(.*)$')
  if not p then
    error('DSYNC unexpected value at ' .. k.hash .. ' field ' .. owner)
  end
  return {owner = owner, permits = tonumber(p), id = id, ops = ops}
end

local function sem_store(k, h)
  redis.call('HSET', k.hash, h.owner, string.format('%d', h.permits) .. ' ' .. h.id .. ' ' .. h.ops)
end

-- sem_drop removes the entry of h, whose permits were given back.
local function sem_drop(k, h)
  redis.call('HDEL', k.hash, h.owner)
  redis.call('ZREM', k.holders, h.owner)
end

-- sem_expire makes the hash expire no sooner than ttl ms from now, and
-- holders when the hash does: holders must outlive every permit the hash
-- counts, or those permits would never be purged. A ttl of 0 changes
-- nothing (the renewal script's check of a fixed lease). A hash kept for a
-- capacity set at runtime (k.kept, or without k.kept known, a hash without
-- expiry: the renewal script does not read the capacity key) keeps no
-- expiry, and holders are extended alone. A hash without expiry that is
-- not kept (just made by this script, or kept for a capacity whose key
-- went) gets one as long as holders and the queue need.
local function sem_expire(k, ttl)
  ttl = tonumber(ttl)
  if ttl <= 0 then
    return
  end
  local pt = redis.call('PTTL', k.hash)
  if k.kept or (pt == -1 and k.kept == nil) then
    expire_at_least(k.holders, ttl)
    return
  end
  if pt == -1 then
    ttl = math.max(ttl, redis.call('PTTL', k.holders), redis.call('PTTL', k.expiry) + 2)
  end
  if pt < ttl then
    redis.call('PEXPIRE', k.hash, ttl)
    pt = ttl
  end
  redis.call('PEXPIRE', k.holders, pt)
end

-- sem_extend makes owner's lease end no sooner than ttl ms after now_ms
-- (never shortened: the client counts on no script doing so), and returns
-- when it ends. fresh says owner had no lease.
local function sem_extend(k, owner, now_ms, ttl, fresh)
  local till = now_ms + tonumber(ttl)
  local cur = not fresh and redis.call('ZSCORE', k.holders, owner)
  if cur and tonumber(cur) >= till then
    till = tonumber(cur)
  else
    redis.call('ZADD', k.holders, till, owner)
  end
  sem_expire(k, ttl)
  return till
end

-- sem_left returns the ms left of owner's lease, or -1.
local function sem_left(k, owner, now_ms)
  local d = redis.call('ZSCORE', k.holders, owner)
  if not d then
    return -1
  end
  return tonumber(d) - now_ms
end

-- sem_purge gives back the permits of every owner whose lease ended, and
-- of every owner whose lease is unknown: when the holders key vanished
-- (deleted, or evicted by maxmemory, which takes keys one at a time) while
-- the hash still counts permits, no lease would end them, and the
-- semaphore would be short of them for as long as it is in use. Their
-- holders learn of the loss at their next renewal, which finds no lease.
-- Every script that adds to holders purges first, so holders is empty
-- while permits are counted only if it vanished. One command when no
-- lease has ended.
local function sem_purge(k, st, now_ms)
  local first = redis.call('ZRANGE', k.holders, 0, 0, 'WITHSCORES')
  if not first[1] then
    if st.used > 0 then
      local v = redis.call('HGETALL', k.hash)
      for i = 1, #v, 2 do
        local f = v[i]
        if f ~= 'cap' and f ~= 'used' and f ~= 'grant' then
          redis.call('HDEL', k.hash, f)
        end
      end
      st.used = 0
    end
    return
  end
  if tonumber(first[2]) > now_ms then
    return
  end
  while true do
    local dead = redis.call('ZRANGEBYSCORE', k.holders, '-inf', now_ms, 'LIMIT', 0, 500)
    if #dead == 0 then
      return
    end
    for _, o in ipairs(dead) do
      local h = sem_holder(k, o)
      if h then
        st.used = st.used - h.permits
        redis.call('HDEL', k.hash, o)
      end
    end
    redis.call('ZREM', k.holders, unpack(dead))
  end
end

-- sem_next_grant moves the grant counter on and returns it.
local function sem_next_grant(st, now_us)
  st.grant = next_token(tonumber(st.grant) and st.grant or nil, nil, now_us)
  return st.grant
end

-- sem_grant gives owner n permits for the acquisition op, on a lease of
-- ttl ms: its hold starts, or grows if it holds some already. An op seen
-- before is not counted twice. h is owner's entry if the caller read it,
-- false if it read none, nil if it did not read. It returns the entry and
-- when its lease ends.
local function sem_grant(k, st, owner, op, n, ttl, now_ms, h)
  if h == nil then
    h = sem_holder(k, owner)
  end
  local fresh = not h
  h = h or {owner = owner, permits = 0, id = op, ops = ''}
  if not seen(h.ops, op) then
    h.permits = h.permits + n
    st.used = st.used + n
  end
  h.ops = remember(h.ops, op, math.floor(now_ms / 1000), acquisition_memory(ttl))
  sem_store(k, h)
  return h, sem_extend(k, owner, now_ms, ttl, fresh)
end

-- sem_dispatch hands permits to the waiters at the head of the queue for
-- as long as the head's request fits: a head that does not fit blocks
-- those behind it, however small their requests (no starvation of large
-- requests). A head asking for more than the capacity is dropped and woken
-- to learn it at its attempt. Each waiter granted permits is woken with the
-- new grant counter, unless it is in the caller's hub (a.hub, '' for none:
-- see hand_to) or is the caller itself (self); when out is not nil, its
-- address, grant and owner are appended to it, as wait.HandOff reads them.
local function sem_dispatch(k, st, limit, now_ms, now_us, a, self, out)
  while true do
    local w = head(k.queue, k.expiry, now_ms)
    st.queued = w ~= false
    if not w then
      return
    end
    local op, owner, n, ttl = parse_entry(w)
    if not op or not ttl then
      dequeue(k.queue, k.expiry, w) -- not a waiter's entry
    elseif n > limit then
      dequeue(k.queue, k.expiry, w)
      wake(a.channel, w)
    elseif st.used + n > limit then
      return
    else
      dequeue(k.queue, k.expiry, w)
      local g = sem_next_grant(st, now_us)
      sem_grant(k, st, owner, op, n, ttl, now_ms)
      if w ~= self and (a.hub == '' or not local_to(w, a.hub)) then
        wake(a.channel, w, g)
      end
      if out then
        out[#out + 1] = entry_address(w)
        out[#out + 1] = g
        out[#out + 1] = owner
      end
    end
  end
end

-- sem_save writes the counters back or, when no permit is held, no live
-- waiter is queued and no capacity is set at runtime, deletes the state:
-- the semaphore is free. A state kept for a capacity set at runtime loses
-- its expiry (see above).
local function sem_save(k, st, now_ms)
  if st.queued == nil then
    st.queued = head(k.queue, k.expiry, now_ms) ~= false
  end
  if st.used <= 0 and not st.queued and not k.kept then
    redis.call('DEL', k.hash, k.holders)
    return
  end
  if st.grant then
    redis.call('HSET', k.hash, 'cap', st.cap, 'used', st.used, 'grant', st.grant)
  else
    redis.call('HSET', k.hash, 'cap', st.cap, 'used', st.used)
  end
  if k.kept then
    redis.call('PERSIST', k.hash)
  end
end
