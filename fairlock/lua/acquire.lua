-- acquire: take or re-enter the fair lock, in turn.
-- KEYS[1] lock key (see load); KEYS[2] queue, KEYS[3] expiry (see
-- queue.lua).
-- ARGV[1] owner id; ARGV[2] operation id, the same on every retry of one
-- acquisition, so that a retry after a lost reply does not count twice;
-- ARGV[3] lease ms; ARGV[4] waiter entry (see hand_off), '' not to queue
-- on failure; ARGV[5] waiter timeout ms; ARGV[6] '1' if an earlier
-- attempt queued the waiter; ARGV[7] wake channel base.
-- Reply: the fencing token of a new hold that the operation took for the
-- lease asked; {1, hold count, token, hold id, remaining ms of the hold}
-- when held by the owner otherwise; {0, remaining ms of the current hold
-- (-1 if free or no expiry), the current or last token ('0' if none)}
-- when not.
--
-- The lock is taken only by its owner re-entering, or when free by the
-- head of the queue, or by anyone if no live waiter is queued: never out
-- of turn. A waiter that finds the lock free and someone else at the head
-- queues, and wakes the head, which may be sleeping out its heartbeat.
local lock, queue, expiry = KEYS[1], KEYS[2], KEYS[3]
local owner, op, entry, registered = ARGV[1], ARGV[2], ARGV[4], ARGV[6] == '1'
local v = redis.pcall('GET', lock)
if type(v) == 'string' and not registered then
  -- The common case, a lock freed by a release that found nobody queued,
  -- which nobody joined since (a waiter that queues finds the lock held,
  -- and flags the hold, see store): one read, one write.
  local last = string.match(v, '^(%d+) free$')
  if last then
    local token = tonumber(last) + 1
    redis.call('SET', lock, string.format('%d 1 0 %s %s %s', token, owner, op, op), 'PX', ARGV[3])
    return token
  end
end
-- (library parts: see newScript)
local s = decode(lock, v)
if s.foreign then
  return unexpected(lock, s.foreign)
end
if s.owner == owner then
  -- A re-entry (which skips the queue), a retry whose first reply was
  -- lost, or a waiter's attempt after a hand-off to it.
  if not seen(s.ops, op) then
    s.count = s.count + 1
  end
  s.ops = remember(s.ops, op, now_s(), acquisition_memory(ARGV[3]))
  store_extending(lock, s, ARGV[3])
  if registered then
    dequeue(queue, expiry, entry)
  end
  return {1, s.count, s.token, s.id, redis.call('PTTL', lock)}
end
local now_ms, now_us = now()
local h = false
if not s.owner then
  h = head(queue, expiry, now_ms)
  if not h or h == entry then
    if h then
      dequeue(queue, expiry, h)
    end
    -- Waiters may be queued behind the head: its release looks.
    s = {token = next_token(s.token, nil, now_us), count = 1, waiting = h ~= false, owner = owner, id = op, ops = op}
    store(lock, s, ARGV[3])
    return tonumber(s.token)
  end
end
if entry ~= '' then
  enqueue(queue, expiry, entry, now_ms, ARGV[5])
  if s.owner and not s.waiting then
    s.waiting = true
    store(lock, s)
  end
end
if not s.owner then
  wake(ARGV[7], h)
  return {0, -1, s.token or '0'}
end
return {0, redis.call('PTTL', lock), s.token}
