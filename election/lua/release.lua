-- release: end the term (Resign) and hand the election to the next
-- candidate in the same script, or announce the lapse and delete the main
-- key (the leader state keeps the last token, see term.lua).
-- KEYS: the election's five (see election_keys).
-- ARGV: the header (see codec.lua), with the term's hold id (a term is
-- never re-entered: the lease is not used); ARGV[12] fence ttl ms;
-- ARGV[13] observe channel.
-- Reply: 0 if it ended a plain term that nothing read (as the mutex's
-- release replies for a plain hold), else {0, the hold id} if the term
-- ended, {-1, ''} if it was not on (any more), followed by the candidate
-- the election was handed to (see hand_to).
local v = redis.call('GET', KEYS[1])
if v == ARGV[4] then
  -- A plain term that nothing read (a read converts it, see term.lua):
  -- no observer knows of it, and nobody queued behind it (queueing
  -- converts it too). It ends without a word.
  redis.call('DEL', KEYS[1])
  return 0
end
-- dsync:library
local k = election_keys()
local a = header()
a.fence_ttl, a.observe, a.turn = ARGV[12], ARGV[13], k.expiry
local s = decode(k.lock, v)
if s.foreign then
  return unexpected(k.lock, s.foreign)
end
if s.owner ~= a.owner or s.id ~= a.id then
  return {-1, ''}
end
local err = convert(k.lock, k.leader, s, a.observe)
if err then
  return err
end
local rev, _, last
rev, _, last, err = leader_rev(k.leader)
if err then
  return err
end
if not s.waiting then
  -- Nobody queued. The election lapses, as it does below, without
  -- defining the queue's part of the library first.
  redis.call('DEL', k.lock)
  announce_lapse(k.leader, a.observe, rev, s.token or last, a.fence_ttl)
  return {0, s.id}
end
-- dsync:library
return {0, s.id, term_pass_on(k, a, s, rev, last, true)}
