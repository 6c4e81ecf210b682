-- capacity: set the capacity in force at runtime, or clear it, and hand
-- what a raised capacity frees to the waiters at the head of the queue.
-- KEYS: see state.lua (hash, holders, queue, expiry, capacity).
-- ARGV[1] the new capacity, '0' to clear the runtime capacity; ARGV[2] the
-- handle's capacity, which the state takes when cleared; ARGV[3] wake
-- channel base; ARGV[4] the caller's process id (see hand_off).
-- Reply: {the capacity in force, ''}, followed by the address, grant and
-- owner id of every waiter handed permits.
local k = sem_keys()
local c = tonumber(ARGV[1])
local st = sem_load(k)
redis.call('ZRANGE', k.holders, 0, 0) -- WRONGTYPE before any write
if c > 0 then
  redis.call('SET', k.cap, ARGV[1])
  st.override = c
else
  redis.call('DEL', k.cap)
  st.override = nil
  if st.cap then
    st.cap = tonumber(ARGV[2])
  end
end
local limit = sem_limit(st, tonumber(ARGV[2]))
local reply = {limit, ''}
if st.cap then
  local now_ms, now_us = now()
  sem_purge(k, st, now_ms)
  sem_dispatch(k, st, limit, now_ms, now_us, ARGV[3], ARGV[4], '', reply)
  sem_save(k, st, now_ms)
end
return reply
