-- release: undo one hold of the owner; the last one frees the mutex and
-- passes it to the waiters (see pass_on).
-- KEYS[1] lock key (see codec.lua); KEYS[2] queue, KEYS[3] expiry (see
-- queue.lua).
-- ARGV: the header (see codec.lua), with the hold's id and plain value
-- (the hold it releases, not another of the same owner, which a retry
-- landing after the owner's next acquisition would find); ARGV[12] the
-- hand-off threshold ms; ARGV[13] '1' if the hold lasted less than the
-- threshold, else '0' (see pass_on), or '2' for such a hold whose
-- releaser woke the head short_window thresholds ago or more: a release
-- that looks at the queue even if no waiter flagged the hold, so that a
-- head that does not come back when it is due (its process died) is
-- handed the mutex by the holder that keeps retaking it; ARGV[14...]
-- entries of waiters of
-- the caller's session queued behind this hold (see Lease.Enqueue),
-- queued in order before anything else.
-- Reply: 0 when the owner's only hold, which nobody waited behind, was
-- released; otherwise {the owner's remaining hold count, or -1 if the
-- owner does not hold that hold; the hold's id ('' if none)}, followed by
-- the waiter handed the mutex or woken (see hand_to).
local v = redis.call('GET', KEYS[1])
if v == ARGV[4] and #ARGV == 13 and ARGV[13] ~= '2' then
  -- The common case: a plain hold, which nobody waits behind.
  redis.call('DEL', KEYS[1])
  return 0
end
-- dsync:library
local lock, queue, expiry = KEYS[1], KEYS[2], KEYS[3]
local a = header()
local s = decode(lock, v)
if s.foreign then
  return unexpected(lock, s.foreign)
end
local after = tonumber(ARGV[12])
a.short = ARGV[13] ~= '0'
if #ARGV > 13 then
  local now_ms, now_us = now()
  for i = 14, #ARGV do
    enqueue(queue, expiry, ARGV[i], now_ms, a.entry_ttl)
  end
  if not s.owner then
    -- The hold is gone (its lease ran out): nobody else would wake them.
    s.waiting = true
    return {-1, '', hand_to(a, pass_on(lock, s, queue, expiry, a, after))}
  end
  flag_waiting(lock, s)
end
if s.owner ~= a.owner or s.id ~= a.id then
  return {-1, ''}
end
if seen(s.ops, a.op) then
  return {s.count, s.id}
end
if s.count > 1 then
  s.count = s.count - 1
  s.ops = remember(s.ops, a.op, now_s(), op_memory)
  store_extending(lock, s, a.lease)
  return {s.count, s.id}
end
if ARGV[13] == '2' then
  s.waiting = true
end
return {0, s.id, hand_to(a, pass_on(lock, s, queue, expiry, a, after))}
