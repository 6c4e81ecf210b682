-- proclaim: change the leader's value while its term is on.
-- KEYS: the election's five (see election_keys).
-- ARGV[1] owner id; ARGV[2] the term's hold id; ARGV[3] the new value;
-- ARGV[4] observe channel; ARGV[5] fence ttl ms.
-- Reply: 1 if the term is on and its value now the new one, 0 if the
-- term is over.
local k = election_keys()
local s, reply = own_term(k, ARGV[1], ARGV[2], ARGV[4])
if not s then
  return reply
end
local rev, id, _, err, st = leader_rev(k.leader)
if err then
  return err
end
local ttl = hold_left(k.lock, s)
local began = 0
if id == s.id then
  began = st.began
end
begin_term(k.leader, ARGV[4], rev, s.id, s.token, ARGV[3], began, ttl, ARGV[5])
return 1
