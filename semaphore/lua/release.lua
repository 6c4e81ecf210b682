-- release: give back n of the owner's permits, and hand what is free to
-- the waiters at the head of the queue (see sem_dispatch).
-- KEYS: see state.lua (state, holders, queue, expiry, capacity).
-- ARGV: the header (see codec.lua), with the hold's id, and for its plain
-- value the plain form that n permits of it would have; ARGV[12] permits
-- n; ARGV[13] the handle's capacity.
-- Reply: 0 when the owner gave back all its permits of a plain form (see
-- state.lua); otherwise {the owner's permits left, or -1 if the owner
-- holds none of that hold; the hold id, prefixed with '!' if the owner
-- holds fewer than n permits and nothing was released}, followed by every
-- waiter handed permits (see hand_to).
local v = redis.pcall('GET', KEYS[1])
if v == ARGV[4] then
  -- The common case: a lone holder gives back all it took with one plain
  -- acquisition.
  redis.call('DEL', KEYS[1])
  return 0
end
-- dsync:library
local a = header()
local owner, op, n, id = a.owner, a.op, tonumber(ARGV[12]), a.id
local k = sem_keys()
if type(v) == 'string' then
  local s = sem_single(v)
  if not s then
    return unexpected(k.hash, 'not a semaphore state')
  end
  if not s.held or s.owner ~= owner or s.id ~= id then
    return {-1, ''}
  elseif seen(s.ops, op) then
    return {s.permits, s.id}
  elseif n > s.permits then
    return {s.permits, '!' .. s.id}
  elseif n == s.permits then
    redis.call('DEL', k.hash)
    return {0, s.id}
  end
  s.permits = s.permits - n
  s.ops = remember(s.ops, op, now_s(), op_memory)
  local ttl = tonumber(a.lease)
  if ttl > 0 and ttl > redis.call('PTTL', k.hash) then
    sem_single_store(k, s, ttl)
  else
    sem_single_store(k, s)
  end
  return {s.permits, s.id}
end
-- The shared form, or no state.
-- The capacity key is read first: a key dsync did not write fails the
-- script before any write, sem_open's included.
local override = sem_override(k)
local st = sem_open(k, v, nil)
st.override = override
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
    if tonumber(a.lease) > 0 then
      sem_extend(k, owner, now_ms, a.lease)
    end
  end
  reply = {h.permits, h.id}
end
if st.cap then
  sem_dispatch(k, st, limit, now_ms, now_us, a, '', reply)
  sem_save(k, st, now_ms)
end
return reply
