-- acquire: take n permits for an owner, in turn.
-- KEYS: see state.lua (state, holders, queue, expiry, capacity).
-- ARGV: the header (see codec.lua); ARGV[12] permits n; ARGV[13] the
-- handle's capacity.
-- Reply: an attempt's (see codec.lua), with the grant counter for a token
-- and the owner's permits for a count: 0 when the fast path took a free
-- semaphore with a plain SET NX, as the client's own SET NX does (the lock
-- core then tries that first again), the grant counter when a lone owner
-- took it in the single form, else the array; when not acquired, the ms
-- until the earliest holder's lease ends or the place of the first waiter
-- queued before this one does, whichever comes first (-1 if neither). An
-- error reply "DSYNC capacity mismatch" when the state's capacity differs
-- from the handle's and none was set at runtime; "DSYNC invalid permits"
-- when n exceeds the capacity in force.
--
-- Waiters that fit are served from the head first, by this script too
-- (their permits freed by an expired lease, say): the request is granted
-- only when no live waiter is queued before it. A waiter that queues, at
-- every attempt, makes the state outlive its entry (see state.lua).
if ARGV[10] == '0' and redis.call('SET', KEYS[1], ARGV[4], 'NX', 'PX', ARGV[5]) then
  -- The common case, as a plain SET NX by the client takes it: a free
  -- semaphore, which promises that nobody is queued and no capacity is set
  -- at runtime (see state.lua); n never exceeds the handle's capacity.
  return 0
end
-- dsync:library
local a = header()
local owner, op, n, lease, entry = a.owner, a.op, tonumber(ARGV[12]), a.lease, a.entry
local registered, hcap = a.registered, tonumber(ARGV[13])
local v = redis.pcall('GET', KEYS[1])
local k = sem_keys()
local s = type(v) == 'string' and sem_single(v)
local override = sem_override(k)
local now_ms, now_us = now()
if (s or not v) and not override then
  -- The single form, or no state: it stays single while the owner is
  -- alone and nobody is queued. A capacity set at runtime keeps the shared
  -- form (see state.lua), which the state takes below.
  s = s or {}
  if s.held and s.cap and s.cap ~= hcap then
    return redis.error_reply('DSYNC capacity mismatch: the semaphore has capacity ' .. s.cap .. ', the handle ' .. hcap)
  end
  local limit = s.cap or hcap
  if n > limit then
    if entry ~= '' then
      dequeue(k.queue, k.expiry, entry)
    end
    return redis.error_reply('DSYNC invalid permits: ' .. n .. ' exceed the capacity ' .. limit)
  end
  if s.held and s.owner == owner and seen(s.ops, op) then
    -- A retry: the lease restarts on its own.
    local left = sem_single_extend(k, lease)
    if registered then
      dequeue(k.queue, k.expiry, entry)
    end
    return {1, s.permits, s.grant or '0', s.id, left}
  end
  if not head(k.queue, k.expiry, now_ms) then
    if not s.held then
      if not s.grant and redis.call('ZCARD', k.holders) > 0 then
        -- Leases of a shared state whose hash vanished: their permits
        -- went with it.
        redis.call('DEL', k.holders)
      end
      if registered then
        dequeue(k.queue, k.expiry, entry)
      end
      local grant = next_token(s.grant, nil, now_us)
      sem_single_store(k, {grant = grant, held = true, cap = hcap, permits = n, owner = owner, id = op, ops = op}, lease)
      return tonumber(grant)
    end
    if s.owner == owner and s.permits + n <= limit then
      -- A re-entry, which adds to the owner's permits.
      s.permits = s.permits + n
      s.ops = remember(s.ops, op, math.floor(now_ms / 1000), acquisition_memory(lease))
      s.cap, s.override = s.cap or hcap, false
      local left = math.max(redis.call('PTTL', k.hash), tonumber(lease))
      sem_single_store(k, s, left)
      if registered then
        dequeue(k.queue, k.expiry, entry)
      end
      return {1, s.permits, s.grant, s.id, left}
    end
    if entry == '' and s.permits + n > limit then
      return not_acquired(redis.call('PTTL', k.hash), s.grant)
    end
  end
  if not s.grant and not s.held then
    s = nil
  end
end
local st = sem_open(k, v, s, hcap, now_ms)
st.override = override
sem_purge(k, st, now_ms)
if not override and st.cap and st.cap ~= hcap then
  local hd = head(k.queue, k.expiry, now_ms)
  if st.used > 0 or (hd and hd ~= entry) then
    return redis.error_reply('DSYNC capacity mismatch: the semaphore has capacity ' .. st.cap .. ', the handle ' .. hcap)
  end
  -- Every permit free and nobody queued: the recorded capacity went with
  -- the last permit, although the state outlives it (a waiter that left
  -- had made it outlive its place).
  st.cap = hcap
end
st.cap = st.cap or hcap
local limit = sem_limit(st, hcap)
if n > limit then
  if entry ~= '' then
    dequeue(k.queue, k.expiry, entry)
  end
  return redis.error_reply('DSYNC invalid permits: ' .. n .. ' exceed the capacity ' .. limit)
end
sem_dispatch(k, st, limit, now_ms, now_us, {channel = a.channel, hub = ''}, entry, nil)
local h = sem_holder(k, owner)
local till
if h and seen(h.ops, op) then
  -- A retry, or a hand-off to this waiter: its lease restarts on its own.
  till = sem_extend(k, owner, now_ms, lease)
  if registered then
    dequeue(k.queue, k.expiry, entry)
  end
elseif st.used + n <= limit and not st.queued then
  sem_next_grant(st, now_us)
  h, till = sem_grant(k, st, owner, op, n, lease, now_ms, h or false)
else
  h = nil
end
if h then
  sem_save(k, st, now_ms)
  return {1, h.permits, st.grant or '1', h.id, till - now_ms}
end
if entry ~= '' then
  enqueue(k.queue, k.expiry, entry, now_ms, a.entry_ttl, not registered)
  st.queued = true
end
sem_save(k, st, now_ms)
if entry ~= '' then
  -- The state outlives the entry, so that a plain SET NX never passes it
  -- (see state.lua).
  sem_expire(k, tonumber(a.entry_ttl) + 2)
end
local first = redis.call('ZRANGE', k.holders, 0, 0, 'WITHSCORES')
local retry = -1
if first[2] then
  retry = math.max(0, tonumber(first[2]) - now_ms)
end
-- A waiter queued before this one may hold it up although permits are
-- free (a head that does not fit): if that waiter dies, its place ends at
-- its expiry, when this one must look again rather than at its next
-- heartbeat. A live head's expiry is always further off than a heartbeat.
local hd = st.queued and head(k.queue, k.expiry, now_ms)
if hd and hd ~= entry then
  local exp = tonumber(redis.call('ZSCORE', k.expiry, hd)) - now_ms
  if retry < 0 or exp < retry then
    retry = exp
  end
end
return not_acquired(retry, st.grant)
