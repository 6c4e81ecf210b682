-- release: give back n of the owner's permits, and hand what is free to
-- the waiters at the head of the queue (see sem_dispatch).
-- KEYS: see state.lua (state, holders, queue, expiry, capacity).
-- ARGV[1] owner id; ARGV[2] operation id, the same on every retry of one
-- release, so that a retry after a lost reply does not release twice;
-- ARGV[3] permits n; ARGV[4] lease ms restored on a partial release ('0'
-- for a fixed lease, which a release never extends); ARGV[5] wake channel
-- base; ARGV[6] the caller's process id (see hand_off); ARGV[7] the id of
-- the hold it may release: another hold of the same owner (a retry
-- landing after the owner's next acquisition) is left alone; ARGV[8] the
-- hold's grant counter, as its acquisition replied; ARGV[9] the handle's
-- capacity.
-- Reply: 0 when the owner gave back all its permits of a single form
-- (see state.lua) on its first try; otherwise {the owner's permits left,
-- or -1 if the owner holds none of that hold; the hold id, prefixed with
-- '!' if the owner holds fewer than n permits and nothing was released},
-- followed by the address, grant and owner id of every waiter handed
-- permits.
local owner, op, n, id = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[7]
-- The common case, a lone holder giving back all it took with one
-- acquisition: one write, which reads the state it replaces. Anything
-- else is put back as it was, expiry included, and handled below. A write
-- the server refused (the hash of the shared form, or out of memory)
-- changed nothing: the state is read again, and the release writes only
-- what it must, which fails then if it still cannot.
local now_at = ARGV[8] .. ' free' -- what the key holds now
local v = redis.pcall('SET', KEYS[1], now_at, 'KEEPTTL', 'GET')
if v == ARGV[8] .. ' ' .. ARGV[9] .. ' ' .. ARGV[3] .. ' ' .. owner .. ' ' .. id .. ' ' .. id then
  return 0
end
-- (library parts: see newScript)
local k = sem_keys()
if type(v) == 'table' then
  -- Nothing was written: the hash of the shared form, or a refusal for
  -- another reason, after which the key is read again.
  now_at = nil
  if refused(v) then
    v = redis.pcall('GET', k.hash)
    now_at = v
  end
end
if type(v) == 'string' then
  local s = sem_single(v)
  local function put(value)
    if value ~= now_at then
      redis.call('SET', k.hash, value, 'KEEPTTL')
    end
  end
  if not s then
    put(v)
    return unexpected(k.hash, 'not a semaphore state')
  end
  if not s.held or s.owner ~= owner or s.id ~= id then
    put(v)
    return {-1, ''}
  elseif seen(s.ops, op) then
    put(v)
    return {s.permits, s.id}
  elseif n > s.permits then
    put(v)
    return {s.permits, '!' .. s.id}
  elseif n == s.permits then
    put(sem_single_value({grant = s.grant, override = s.override}))
    return {0, s.id}
  end
  s.permits = s.permits - n
  s.ops = remember(s.ops, op, now_s(), op_memory)
  local ttl = tonumber(ARGV[4])
  if ttl > 0 and ttl > redis.call('PTTL', k.hash) then
    sem_single_store(k, s, ttl)
  else
    sem_single_store(k, s)
  end
  return {s.permits, s.id}
end
if not v and now_at then
  redis.call('DEL', k.hash) -- the SET above made it
end
-- The shared form, or no state.
local st = sem_open(k, v, nil)
st.override = sem_override(k)
local limit = sem_limit(st, 0)
local now_ms, now_us = now()
sem_purge(k, st, now_ms)
local h = sem_holder(k, owner)
local reply
if not h or h.id ~= id then
  reply = {-1, ''}
elseif seen(h.ops, op) then
  return {h.permits, h.id}
elseif n > h.permits then
  return {h.permits, '!' .. h.id}
else
  h.permits = h.permits - n
  st.used = st.used - n
  if h.permits == 0 then
    sem_drop(k, h)
  else
    h.ops = remember(h.ops, op, math.floor(now_ms / 1000), op_memory)
    sem_store(k, h)
    if tonumber(ARGV[4]) > 0 then
      sem_extend(k, owner, now_ms, ARGV[4])
    end
  end
  reply = {h.permits, h.id}
end
if st.cap then
  sem_dispatch(k, st, limit, now_ms, now_us, ARGV[5], ARGV[6], '', reply)
  sem_save(k, st, now_ms)
end
return reply
