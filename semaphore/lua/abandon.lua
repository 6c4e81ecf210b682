-- abandon: clean up after an acquisition that failed or was given up:
-- leave the queue, and undo the acquisition if its reply was lost or
-- permits were handed to this waiter, handing them on.
-- KEYS: see state.lua (state, holders, queue, expiry, capacity).
-- ARGV[1] owner id; ARGV[2] operation id of the acquisition; ARGV[3]
-- permits n; ARGV[4] waiter entry ('' if it never queued); ARGV[5] wake
-- channel base; ARGV[6] the caller's process id (see hand_off).
-- Reply: {1 if an acquisition was undone, else 0; ''}, followed by the
-- address, grant and owner id of every waiter handed permits.
local k = sem_keys()
local owner, op, n = ARGV[1], ARGV[2], tonumber(ARGV[3])
if ARGV[4] ~= '' then
  dequeue(k.queue, k.expiry, ARGV[4])
end
local v = redis.pcall('GET', k.hash)
if type(v) == 'string' then
  -- The single form: nobody is queued to hand permits to.
  local s = sem_single(v)
  if not s then
    return unexpected(k.hash, 'not a semaphore state')
  end
  if not s.held or s.owner ~= owner or not seen(s.ops, op) then
    return {0, ''}
  end
  s.permits = s.permits - math.min(n, s.permits)
  if s.permits == 0 then
    s.held = nil
  else
    -- Forgetting the id keeps a retried abandon from undoing it twice.
    s.ops = forget(s.ops, op)
  end
  sem_single_store(k, s)
  return {1, ''}
end
local st = sem_open(k, v, nil)
if not st.cap then
  return {0, ''}
end
st.override = sem_override(k)
local now_ms, now_us = now()
sem_purge(k, st, now_ms)
local reply = {0, ''}
local h = sem_holder(k, owner)
if h and seen(h.ops, op) then
  reply[1] = 1
  n = math.min(n, h.permits)
  h.permits = h.permits - n
  st.used = st.used - n
  if h.permits == 0 then
    sem_drop(k, h)
  else
    -- Forgetting the id keeps a retried abandon from undoing it twice.
    h.ops = forget(h.ops, op)
    sem_store(k, h)
  end
end
sem_dispatch(k, st, sem_limit(st, 0), now_ms, now_us, ARGV[5], ARGV[6], '', reply)
sem_save(k, st, now_ms)
return reply
