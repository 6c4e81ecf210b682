-- acquire: take or re-enter the fair lock, in turn.
-- KEYS[1] lock key (see codec.lua); KEYS[2] queue, KEYS[3] expiry (see
-- queue.lua); KEYS[4] fence key (see fence.lua).
-- ARGV: the header (see codec.lua).
-- Reply: an attempt's (see codec.lua).
--
-- The lock is taken only by its owner re-entering, or when free by the
-- head of the queue, or by anyone if no live waiter is queued: never out
-- of turn. A waiter that finds the lock free and someone else at the head
-- queues, and wakes the head, which may be sleeping out its heartbeat.
-- The lock key exists whenever a live waiter is queued (see a.turn in
-- exclusive.lua): where it is missing, nobody is queued, and a plain SET
-- NX, the client's or this script's, takes the lock in turn.
if ARGV[10] == '0' and redis.call('SET', KEYS[1], ARGV[4], 'NX', 'PX', ARGV[5]) then
  -- The common case: a free lock nobody is queued for, taken as a plain
  -- SET does.
  return 0
end
-- dsync:library
local lock, queue, expiry = KEYS[1], KEYS[2], KEYS[3]
local a = header()
a.turn = expiry
local s = load(lock)
if s.foreign then
  return unexpected(lock, s.foreign)
end
if s.owner == a.owner then
  -- A re-entry (which skips the queue), a retry whose first reply was
  -- lost, or a waiter's attempt after a hand-off to it.
  return reenter(lock, s, a, queue, expiry)
end
local now_ms, now_us = now()
local h = false
if not s.owner then
  h = head(queue, expiry, now_ms)
  if not h or h == a.entry then
    if h then
      dequeue(queue, expiry, h)
    end
    -- Waiters may be queued behind the head: its release looks.
    return tonumber(take(lock, s, a, h ~= false, now_us).token)
  end
end
if not s.owner then
  wake(a.channel, h)
end
return queue_behind(lock, s, a, queue, expiry, now_ms)
