-- force: free the fair lock whoever holds it, and hand it to the head of
-- the queue.
-- KEYS[1] lock key (see load); KEYS[2] queue, KEYS[3] expiry (see
-- queue.lua).
-- ARGV[1] wake channel base; ARGV[2] the caller's process id (see
-- hand_off); ARGV[3] the fencing token of the hold to take, or '' for
-- whichever.
-- Reply: {1 if a hold was taken, else 0; its hold id, or the current
-- holder's owner id if it was kept because its token differs}, followed
-- by the waiter's address, token and owner id if it was handed to a
-- waiter.
local s = load(KEYS[1])
if s.foreign then
  return unexpected(KEYS[1], s.foreign)
end
if not s.owner then
  return {0, ''}
end
if ARGV[3] ~= '' and s.token ~= ARGV[3] then
  return {0, s.owner}
end
local id = s.id
s.waiting = true
return {1, id, hand_off(KEYS[1], nil, s, ARGV[1], nil, ARGV[2], function() return pop_head(KEYS[2], KEYS[3]) end)}
