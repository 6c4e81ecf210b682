-- acquire: take or re-enter the fair lock, in turn.
-- KEYS[1] lock key (see load); KEYS[2] queue, KEYS[3] expiry (see
-- queue.lua); KEYS[4] fence key.
-- ARGV[1] owner id; ARGV[2] operation id, the same on every retry of one
-- acquisition, so that a retry after a lost reply does not count twice;
-- ARGV[3] lease ms; ARGV[4] waiter entry (see hand_off), '' not to queue
-- on failure; ARGV[5] waiter timeout ms; ARGV[6] '1' if an earlier
-- attempt queued the waiter; ARGV[7] fence ttl ms; ARGV[8] wake channel
-- base.
-- Reply: {1, hold count, token, hold id, remaining ms of the hold} when
-- held by the owner; {0,
-- remaining ms of the current hold (-1 if free or no expiry), the current
-- or last token ('0' if none)} otherwise.
--
-- The lock is taken only by its owner re-entering, or when free by the
-- head of the queue, or by anyone if no live waiter is queued: never out
-- of turn. A waiter that finds the lock free and someone else at the head
-- queues, and wakes the head, which may be sleeping out its heartbeat.
local lock, queue, expiry = KEYS[1], KEYS[2], KEYS[3]
local owner, op, entry, registered = ARGV[1], ARGV[2], ARGV[4], ARGV[6] == '1'
local s = load(lock)
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
local now_ms = now()
local h = false
if not s.owner then
  h = head(queue, expiry, now_ms)
  if not h or h == entry then
    -- The token first: a foreign fence key fails before any write.
    local token = next_token(s.token, KEYS[4])
    if h then
      dequeue(queue, expiry, h)
    end
    s = {token = token, count = 1, waiting = h ~= false, owner = owner, id = op, ops = op}
    grant(lock, KEYS[4], s, ARGV[3], ARGV[7])
    return {1, 1, s.token, s.id, tonumber(ARGV[3])}
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
  wake(ARGV[8], h)
  return {0, -1, s.token or '0'}
end
return {0, redis.call('PTTL', lock), s.token}
