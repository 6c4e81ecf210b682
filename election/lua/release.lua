-- release: end the term (Resign) and hand the election to the next
-- candidate in the same script, or announce the lapse.
-- KEYS: the election's five (see election_keys).
-- ARGV[1] owner id; ARGV[2] operation id, the same on every retry;
-- ARGV[3] unused (a term is never re-entered); ARGV[4] wake channel base;
-- ARGV[5] fence ttl ms; ARGV[6] the caller's hub id (see hand_off);
-- ARGV[7] the hold id of the term; ARGV[8] observe channel.
-- Reply: {0, the hold id} if the term ended, {-1, ''} if it was not on
-- (any more), followed by the candidate's address, token and owner id
-- when the election was handed on.
local k = election_keys()
local owner = ARGV[1]
local s = load(k.lock)
if s.foreign then
  return unexpected(k.lock, s.foreign)
end
if s.owner ~= owner or not listed(ARGV[7], s.id) then
  return {-1, ''}
end
local rev, _, last, err = leader_rev(k.leader)
if err then
  return err
end
local a = {wake = ARGV[4], fence_ttl = ARGV[5], hub = ARGV[6], observe = ARGV[8]}
local out = {0, s.id}
local address, token, next_owner = pass_on(k, a, s, rev, last, true)
if address then
  out[3], out[4], out[5] = address, token, next_owner
end
return out
