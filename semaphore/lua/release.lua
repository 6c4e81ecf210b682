-- release: give back n of the owner's permits, and hand what is free to
-- the waiters at the head of the queue (see sem_dispatch).
-- KEYS: see state.lua (hash, holders, queue, expiry, capacity).
-- ARGV[1] owner id; ARGV[2] operation id, the same on every retry of one
-- release, so that a retry after a lost reply does not release twice;
-- ARGV[3] permits n; ARGV[4] lease ms restored on a partial release ('0'
-- for a fixed lease, which a release never extends); ARGV[5] wake channel
-- base; ARGV[6] the caller's process id (see hand_off); ARGV[7] the ids of
-- the holds it may release, space-separated: another hold of the same
-- owner (a retry landing after the owner's next acquisition) is left alone.
-- Reply: {the owner's permits left, or -1 if the owner holds none of
-- those holds; the hold id, prefixed with '!' if the owner holds fewer
-- than n permits and nothing was released}, followed by the address, grant
-- and owner id of every waiter handed permits.
local k = sem_keys()
local owner, op, n = ARGV[1], ARGV[2], tonumber(ARGV[3])
local st = sem_load(k)
local limit = sem_limit(st, 0)
local now_ms, now_us = now()
sem_purge(k, st, now_ms)
local h = sem_holder(k, owner)
local reply
if not h or not listed(ARGV[7], h.id) then
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
