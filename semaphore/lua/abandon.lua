-- abandon: clean up after an acquisition that failed or was given up:
-- leave the queue, and undo the acquisition if its reply was lost or
-- permits were handed to this waiter, handing them on.
-- KEYS: see state.lua (state, holders, queue, expiry, capacity).
-- ARGV: the header (see codec.lua) of the acquisition; ARGV[12] permits n;
-- ARGV[13] the handle's capacity.
-- Reply: {1 if an acquisition was undone, else 0; ''}, followed by every
-- waiter handed permits (see hand_to).
local k = sem_keys()
local a = header()
local owner, op, n = a.owner, a.op, tonumber(ARGV[12])
if a.entry ~= '' then
  dequeue(k.queue, k.expiry, a.entry)
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
    redis.call('DEL', k.hash)
  else
    -- Forgetting the id keeps a retried abandon from undoing it twice.
    s.ops = forget(s.ops, op)
    sem_single_store(k, s)
  end
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
sem_dispatch(k, st, sem_limit(st, 0), now_ms, now_us, a, '', reply)
sem_save(k, st, now_ms)
return reply
