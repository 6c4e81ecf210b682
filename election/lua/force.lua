-- force: end the current term whoever leads, and hand the election to
-- the next candidate, or announce the lapse.
-- KEYS: the election's five (see election_keys).
-- ARGV[1] wake channel base; ARGV[2] fence ttl ms; ARGV[3] the caller's
-- hub id (see hand_off); ARGV[4] the fencing token of the term to end, or
-- '' for whichever; ARGV[5] observe channel.
-- Reply: {1 if a term was ended, else 0; its hold id, or the leader's
-- owner id if it was kept because its token differs}, followed by the
-- candidate's address, token and owner id if the election was handed on.
local k = election_keys()
local s = load(k.lock)
if s.foreign then
  return unexpected(k.lock, s.foreign)
end
if not s.owner then
  return {0, ''}
end
if ARGV[4] ~= '' and s.token ~= ARGV[4] then
  return {0, s.owner}
end
local rev, _, last, err = leader_rev(k.leader)
if err then
  return err
end
s.waiting = true
local a = {wake = ARGV[1], fence_ttl = ARGV[2], hub = ARGV[3], observe = ARGV[5]}
local out = {1, s.id}
local address, token, next_owner = pass_on(k, a, s, rev, last, true)
if address then
  out[3], out[4], out[5] = address, token, next_owner
end
return out
