-- force: free the mutex whoever holds it, and pass it to the waiters.
-- KEYS[1] lock key (see codec.lua); KEYS[2] queue, KEYS[3] expiry (see
-- queue.lua).
-- ARGV: the header (see codec.lua), of which the channel, the hub id and
-- the entry ttl count; ARGV[12] the fencing token of the hold to take, or
-- '' for whichever; ARGV[13] the hand-off threshold ms.
-- Reply: {1 if a hold was taken, else 0; its hold id, or the current
-- holder's owner id if it was kept because its token differs}, followed
-- by the waiter handed the mutex or woken (see hand_to).
local a = header()
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
-- The recovery tool looks at the queue whatever the flag says.
s.waiting = true
return {1, s.id, hand_to(a, pass_on(KEYS[1], s, KEYS[2], KEYS[3], a, tonumber(ARGV[13])))}
