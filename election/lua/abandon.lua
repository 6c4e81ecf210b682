-- abandon: clean up after a campaign that failed or was given up: leave
-- the queue, and undo the term if the campaign's reply was lost or the
-- election was handed to it, passing it on to the head. An election found
-- free is passed on too: its last term expired, and the head may not know
-- yet.
-- KEYS: the election's five (see election_keys).
-- ARGV: the header (see codec.lua) of the campaign; ARGV[12] fence ttl
-- ms; ARGV[13] observe channel.
-- Reply: {1 if a term was undone, else 0; ''}, followed by the candidate
-- the election was handed to (see hand_to).
local k = election_keys()
local a = header()
a.fence_ttl, a.observe, a.turn = ARGV[12], ARGV[13], k.expiry
local owner, op = a.owner, a.op
if a.entry ~= '' then
  dequeue(k.queue, k.expiry, a.entry)
  redis.pcall('HDEL', k.values, a.entry)
end
local s = load(k.lock)
if s.foreign then
  return {0, ''}
end
if s.term and s.owner == owner and s.id == op then
  -- Its own plain term, which nothing read: undone without a word, as
  -- release.lua's fast path ends it (nobody queued behind it either).
  redis.call('DEL', k.lock)
  return {1, ''}
end
if convert(k.lock, k.leader, s, a.observe) then
  return {0, ''}
end
local undone = 0
if s.owner == owner and seen(s.ops, op) then
  undone = 1
elseif s.owner then
  -- Its main key was kept for this candidate's turn, among others'.
  leave_turn(k.lock, s, k.expiry)
  return {0, ''}
end
local rev, _, last, err = leader_rev(k.leader)
if err then
  return {undone, ''} -- the term expires by itself
end
s.waiting = true
return {undone, '', term_pass_on(k, a, s, rev, last, undone == 1)}
