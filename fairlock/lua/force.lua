-- force: free the fair lock whoever holds it, and hand it to the head of
-- the queue.
-- KEYS[1] lock key (see codec.lua); KEYS[2] queue, KEYS[3] expiry (see
-- queue.lua); KEYS[4] fence key (see fence.lua).
-- ARGV: the header (see codec.lua), of which the channel and the hub id
-- count; ARGV[12] the fencing token of the hold to take, or '' for
-- whichever.
-- Reply: {1 if a hold was taken, else 0; its hold id, or the current
-- holder's owner id if it was kept because its token differs}, followed
-- by the waiter handed the lock (see hand_to).
local a = header()
a.turn = KEYS[3]
local s = load(KEYS[1])
if s.foreign then
  return unexpected(KEYS[1], s.foreign)
end
if not s.owner then
  return {0, ''}
end
if ARGV[12] ~= '' and s.token ~= ARGV[12] then
  return {0, s.owner}
end
s.waiting = true
return {1, s.id, hand_to(a, pass_on(KEYS[1], s, KEYS[2], KEYS[3], a))}
