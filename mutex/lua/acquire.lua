-- acquire: take or re-enter the mutex.
-- KEYS[1] lock key (see codec.lua); KEYS[2] queue, KEYS[3] expiry (see
-- queue.lua).
-- ARGV: the header (see codec.lua); ARGV[12] the hand-off threshold ms
-- (see pass_on).
-- Reply: an attempt's (see codec.lua).
--
-- Anyone takes a free mutex, unless the waiter at the head of the queue
-- has waited past the threshold: then only that waiter does, and a
-- newcomer queues behind it and wakes it.
if ARGV[10] == '0' and redis.call('SET', KEYS[1], ARGV[4], 'NX', 'PX', ARGV[5]) then
  -- The common case: a free mutex nobody waits for, taken as a plain
  -- SET does.
  return 0
end
-- dsync:library
local lock, queue, expiry = KEYS[1], KEYS[2], KEYS[3]
local a = header()
local s = load(lock)
if s.foreign then
  return unexpected(lock, s.foreign)
end
if s.owner == a.owner then
  enter(lock, s, a)
  if a.registered then
    dequeue(queue, expiry, a.entry)
  end
  return acquired(lock, s)
end
local now_ms, now_us = now()
local h, since = false, 0
if not s.owner then
  h, since = head(queue, expiry, now_ms)
  if not h or h == a.entry or now_ms - since < tonumber(ARGV[12]) then
    if a.registered then
      dequeue(queue, expiry, a.entry)
    end
    -- Waiters may be left behind it (or a marker says so): its release
    -- looks.
    return tonumber(take(lock, s, a, h ~= false or s.token ~= nil, now_us).token)
  end
end
if a.entry ~= '' then
  enqueue(queue, expiry, a.entry, now_ms, a.entry_ttl)
  if s.owner then
    flag_waiting(lock, s)
  end
end
if not s.owner then
  wake(a.channel, h)
  return not_acquired(-1, s.token)
end
return not_acquired(redis.call('PTTL', lock), s.token)
