-- token: draw the token of a term taken by a plain campaign (see
-- term.lua), converting it.
-- KEYS: the election's five (see election_keys).
-- ARGV: the header (see codec.lua), of which the owner and the hold id
-- count.
-- Reply: the term's token, or 0 if that very term is not on.
local k = election_keys()
local s = load(k.lock)
if s.foreign then
  return unexpected(k.lock, s.foreign)
end
if s.owner ~= ARGV[1] or s.id ~= ARGV[3] then
  return 0
end
local err = convert(k.lock, k.leader, s)
if err then
  return err
end
return tonumber(s.token)
