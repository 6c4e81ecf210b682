-- capacity: set the capacity in force at runtime, or clear it, and hand
-- what a raised capacity frees to the waiters at the head of the queue.
-- KEYS: see state.lua (state, holders, queue, expiry, capacity).
-- ARGV[1] the new capacity, '0' to clear the runtime capacity; ARGV[2] the
-- handle's capacity, which the state takes when cleared, or when set
-- on a semaphore without a state; ARGV[3] wake channel base; ARGV[4] the
-- caller's hub id (see hand_to).
-- Reply: {the capacity in force, ''}, followed by every waiter handed
-- permits (see hand_to).
--
-- While a capacity is set at runtime the state is kept in the shared form
-- without expiry, free or not, so that a plain SET NX of it never grants
-- above that capacity (see state.lua): setting one turns a single form or
-- no state into it; clearing one gives it back an expiry as long as its
-- holders and waiters need, or deletes it if the semaphore is free.
local k = sem_keys()
local c = tonumber(ARGV[1])
local v = redis.pcall('GET', k.hash)
local s = type(v) == 'string' and sem_single(v)
if type(v) == 'string' and not s then
  return unexpected(k.hash, 'not a semaphore state')
end
-- WRONGTYPE before any write: a capacity key written before a foreign
-- queue failed the script would be one that no plain SET NX sees.
redis.call('ZRANGE', k.holders, 0, 0)
redis.call('ZRANGE', k.queue, 0, 0)
redis.call('ZRANGE', k.expiry, 0, 0)
sem_override(k)
if s and c == 0 then
  -- No capacity set at runtime is in force over a single form (but an
  -- earlier version's mark): nobody is queued to hand permits to.
  redis.call('DEL', k.cap)
  s.override = false
  if s.held then
    s.cap = tonumber(ARGV[2])
  end
  sem_single_store(k, s)
  return {tonumber(ARGV[2]), ''}
end
local now_ms, now_us = now()
local st = sem_open(k, v, s or nil, ARGV[2], now_ms)
if c > 0 then
  redis.call('SET', k.cap, ARGV[1])
  st.override, st.cap = c, st.cap or tonumber(ARGV[2])
else
  redis.call('DEL', k.cap)
  if st.cap then
    st.cap = tonumber(ARGV[2])
  end
end
k.kept = c > 0
local limit = sem_limit(st, tonumber(ARGV[2]))
local reply = {limit, ''}
if st.cap then
  sem_purge(k, st, now_ms)
  sem_dispatch(k, st, limit, now_ms, now_us, {channel = ARGV[3], hub = ARGV[4]}, '', reply)
  sem_save(k, st, now_ms)
  if not k.kept and redis.call('PTTL', k.hash) == -1 then
    -- Kept for the capacity cleared: as long as holders and waiters need.
    local ttl = math.max(redis.call('PTTL', k.holders), redis.call('PTTL', k.expiry) + 2)
    if ttl > 0 then
      redis.call('PEXPIRE', k.hash, ttl)
    else
      redis.call('DEL', k.hash)
    end
  end
end
return reply
