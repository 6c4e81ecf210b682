-- token: draw the token of a term taken by a plain campaign (see
-- term.lua), converting it.
-- KEYS: the election's five (see election_keys).
-- ARGV: the header (see codec.lua), of which the owner and the hold id
-- count.
-- Reply: the term's token, or 0 if that very term is not on.
local k = election_keys()
local s, reply = own_term(k, ARGV[1], ARGV[3])
if not s then
  return reply
end
return tonumber(s.token)
