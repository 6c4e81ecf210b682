-- force: end the current term whoever leads, and hand the election to
-- the next candidate, or announce the lapse.
-- KEYS: the election's five (see election_keys).
-- ARGV: the header (see codec.lua), of which the channel and the hub id
-- count; ARGV[12] the fencing token of the term to end, or '' for
-- whichever; ARGV[13] fence ttl ms; ARGV[14] observe channel.
-- Reply: {1 if a term was ended, else 0; its hold id, or the leader's
-- owner id if it was kept because its token differs}, followed by the
-- candidate the election was handed to (see hand_to).
local k = election_keys()
local a = header()
a.fence_ttl, a.observe, a.turn = ARGV[13], ARGV[14], k.expiry
local s = load(k.lock)
if s.foreign then
  return unexpected(k.lock, s.foreign)
end
local err = convert(k.lock, k.leader, s, a.observe)
if err then
  return err
end
if not s.owner then
  return {0, ''}
end
if ARGV[12] ~= '' and s.token ~= ARGV[12] then
  return {0, s.owner}
end
local rev, _, last
rev, _, last, err = leader_rev(k.leader)
if err then
  return err
end
s.waiting = true
return {1, s.id, term_pass_on(k, a, s, rev, last, true)}
