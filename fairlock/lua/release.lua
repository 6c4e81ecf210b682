-- release: undo one hold of the owner; the last one hands the fair lock to
-- the head of the queue (see hand_off, pop_head).
-- KEYS[1] lock key (see load); KEYS[2] queue, KEYS[3] expiry (see
-- queue.lua); KEYS[4] fence key.
-- ARGV[1] owner id; ARGV[2] operation id, the same on every retry of one
-- release, so that a retry after a lost reply does not release twice;
-- ARGV[3] lease ms, restored on a partial release ('0' for a fixed lease,
-- which a release never extends); ARGV[4] wake channel base; ARGV[5] fence
-- ttl ms; ARGV[6] the caller's process id (see hand_off); ARGV[7] the ids
-- of the holds it may release, space-separated (one, unless the caller
-- does not know which of its owner's holds is on this server): another
-- hold of the same owner (a retry landing after the owner's next
-- acquisition) is not released.
-- Reply: {the owner's remaining hold count, or -1 if the owner holds
-- nothing; the id of the hold ('' if none)}, followed by the waiter's
-- address, token and owner id when the lock was handed to a waiter.
local lock, queue, expiry = KEYS[1], KEYS[2], KEYS[3]
local owner, op = ARGV[1], ARGV[2]
local s = load(lock)
if s.foreign then
  return unexpected(lock, s.foreign)
end
if s.owner ~= owner or not listed(ARGV[7], s.id) then
  return {-1, ''}
end
if seen(s.ops, op) then
  return {s.count, s.id}
end
if s.count > 1 then
  s.count = s.count - 1
  s.ops = remember(s.ops, op, now_s(), op_memory)
  store_extending(lock, s, ARGV[3])
  return {s.count, s.id}
end
return {0, s.id, hand_off(lock, KEYS[4], s, ARGV[4], ARGV[5], ARGV[6], function() return pop_head(queue, expiry) end)}
