-- acquire: take or re-enter the mutex.
-- KEYS[1] lock key (see codec.lua); KEYS[2] queue, KEYS[3] expiry (see
-- queue.lua).
-- ARGV: the header (see codec.lua); ARGV[12] the hand-off threshold ms
-- (see pass_on).
-- Reply: an attempt's (see codec.lua).
--
-- Anyone takes a free mutex, unless the waiter at the head of the queue
-- is due (see pass_on): it has waited past the threshold since it queued,
-- or was woken to try short_window thresholds ago or more. Then the mutex
-- is handed to that waiter here, as a release would have (so that a head
-- that died holds it up for its hand-off lease at most), and the newcomer
-- queues behind it. A woken head that finds the mutex held before it is
-- due does not flag the hold (so that the holder's release stays a plain
-- one) and tries again when it is due.
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
  return reenter(lock, s, a, queue, expiry)
end
local now_ms, now_us = now()
local after = tonumber(ARGV[12])
if not s.owner then
  local h, since = head(queue, expiry, now_ms)
  local woken = h and woken_for(since, now_ms)
  if not h or h == a.entry or (woken and woken < short_window * after) or (not woken and now_ms - math.floor(since) < after) then
    if a.registered then
      dequeue(queue, expiry, a.entry)
    end
    -- Waiters may be left behind it (or a marker says so): its release
    -- looks.
    return tonumber(take(lock, s, a, h ~= false or s.token ~= nil, now_us).token)
  end
  s.waiting = true
  local w, grant = pass_on(lock, s, queue, expiry, a, 0)
  if not w then
    -- The head was not a waiter's entry, and nobody else is queued.
    if a.registered then
      dequeue(queue, expiry, a.entry)
    end
    return tonumber(take(lock, s, a, false, now_us).token)
  end
  -- Published whatever the waiter's hub: the caller learns of it only
  -- from its own attempt's reply, which says nothing of it.
  wake(a.channel, w, grant)
  s = load(lock)
end
if a.registered and after > 0 then
  local h, since = head(queue, expiry, now_ms)
  local woken = h == a.entry and woken_for(since, now_ms)
  if woken and woken < short_window * after then
    enqueue(queue, expiry, a.entry, now_ms, a.entry_ttl)
    local due, left = short_window * after - woken, hold_left(lock, s)
    if left >= 0 and left < due then
      due = left -- the hold ends first (a key with no expiry: unknown)
    end
    return not_acquired(due, s.token)
  end
end
return queue_behind(lock, s, a, queue, expiry, now_ms)
