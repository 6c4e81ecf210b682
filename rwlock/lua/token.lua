-- token: draw the fencing token of a plain write hold (see rw.lua),
-- keeping its expiry.
-- KEYS: see rw.lua.
-- ARGV: the header (see codec.lua), of which the owner and the hold id
-- count.
-- Reply: the write hold's token, or 0 if that very hold is not there.
local s = rw_decode(redis.pcall('GET', W))
if s.foreign then
  return unexpected(W, s.foreign)
end
if s.kind ~= 'write' or s.owner ~= ARGV[1] or s.id ~= ARGV[3] then
  return 0
end
if not s.token then
  store(W, s)
end
return tonumber(s.token)
