-- release: undo one hold of the owner; the last one hands the fair lock to
-- the head of the queue (see pass_on).
-- KEYS[1] lock key (see codec.lua); KEYS[2] queue, KEYS[3] expiry (see
-- queue.lua); KEYS[4] fence key (see fence.lua).
-- ARGV: the header (see codec.lua), with the hold's id and plain value
-- (the hold it releases, not another of the same owner, which a retry
-- landing after the owner's next acquisition would find).
-- Reply: 0 when the owner's only hold, which nobody queued behind, was
-- released; otherwise {the owner's remaining hold count, or -1 if the
-- owner does not hold that hold, its hold having ended or gone; the hold's
-- id ('' if none)}, followed by the waiter handed the lock (see hand_to).
local v = redis.call('GET', KEYS[1])
if v == ARGV[4] then
  -- The common case: a plain hold, which nobody queued behind.
  redis.call('DEL', KEYS[1])
  return 0
end
-- dsync:library
local lock, queue, expiry = KEYS[1], KEYS[2], KEYS[3]
local a = header()
a.turn = expiry
local s = decode(lock, v)
if s.foreign then
  return unexpected(lock, s.foreign)
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
return {0, s.id, hand_to(a, pass_on(lock, s, queue, expiry, a))}
