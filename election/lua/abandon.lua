-- abandon: clean up after a campaign that failed or was given up: leave
-- the queue, and undo the term if the campaign's reply was lost or the
-- election was handed to it, passing it on to the head. An election found
-- free is passed on too: its last term expired, and the head may not know
-- yet.
-- KEYS: the election's five (see election_keys).
-- ARGV[1] owner id; ARGV[2] operation id of the campaign; ARGV[3] waiter
-- entry ('' if it never queued); ARGV[4] wake channel base; ARGV[5] fence
-- ttl ms; ARGV[6] the caller's hub id (see hand_off); ARGV[7] observe
-- channel.
-- Reply: {1 if a term was undone, else 0; ''}, followed by the
-- candidate's address, token and owner id if the election was handed on.
local k = election_keys()
local owner, op = ARGV[1], ARGV[2]
if ARGV[3] ~= '' then
  dequeue(k.queue, k.expiry, ARGV[3])
  redis.pcall('HDEL', k.values, ARGV[3])
end
local s = load(k.lock)
if s.foreign then
  return {0, ''}
end
local undone = 0
if s.owner == owner and seen(s.ops, op) then
  undone = 1
elseif s.owner then
  return {0, ''}
end
local rev, _, last, err = leader_rev(k.leader)
if err then
  return {undone, ''} -- the term expires by itself
end
s.waiting = true
local a = {wake = ARGV[4], fence_ttl = ARGV[5], hub = ARGV[6], observe = ARGV[7]}
local out = {undone, ''}
local address, token, next_owner = pass_on(k, a, s, rev, last, undone == 1)
if address then
  out[3], out[4], out[5] = address, token, next_owner
end
return out
