-- capacity: set the capacity in force at runtime, or clear it, and hand
-- what a raised capacity frees to the waiters at the head of the queue.
-- KEYS: see state.lua (state, holders, queue, expiry, capacity).
-- ARGV[1] the new capacity, '0' to clear the runtime capacity; ARGV[2] the
-- handle's capacity, which the state takes when cleared; ARGV[3] wake
-- channel base; ARGV[4] the caller's hub id (see hand_to).
-- Reply: {the capacity in force, ''}, followed by every waiter handed
-- permits (see hand_to).
local k = sem_keys()
local c = tonumber(ARGV[1])
local v = redis.pcall('GET', k.hash)
local s = type(v) == 'string' and sem_single(v)
if type(v) == 'string' and not s then
  return unexpected(k.hash, 'not a semaphore state')
end
local st = not s and sem_open(k, v, nil)
redis.call('ZRANGE', k.holders, 0, 0) -- WRONGTYPE before any write
sem_override(k)
if c > 0 then
  redis.call('SET', k.cap, ARGV[1])
else
  redis.call('DEL', k.cap)
end
if s then
  -- The single form marks a capacity set at runtime (see state.lua);
  -- nobody is queued to hand permits to.
  s.override = c > 0
  if s.held and c == 0 then
    s.cap = tonumber(ARGV[2])
  end
  sem_single_store(k, s)
  return {c > 0 and c or tonumber(ARGV[2]), ''}
end
if c > 0 then
  st.override = c
elseif st.cap then
  st.cap = tonumber(ARGV[2])
end
local limit = sem_limit(st, tonumber(ARGV[2]))
local reply = {limit, ''}
if st.cap then
  local now_ms, now_us = now()
  sem_purge(k, st, now_ms)
  sem_dispatch(k, st, limit, now_ms, now_us, {channel = ARGV[3], hub = ARGV[4]}, '', reply)
  sem_save(k, st, now_ms)
end
return reply
