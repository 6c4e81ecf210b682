-- token: draw the fencing token of an exclusive hold that has none yet (a
-- plain hold, see codec.lua), keeping its expiry.
-- KEYS[1] the main key.
-- ARGV: the header (see codec.lua), of which the owner, the hold id and
-- its plain value count.
-- Reply: the hold's token, or 0 if that very hold is not there.
local s = load(KEYS[1])
if s.foreign then
  return unexpected(KEYS[1], s.foreign)
end
if s.owner ~= ARGV[1] or s.id ~= ARGV[3] then
  return 0
end
if not s.token then
  s.token = draw(nil)
  store(KEYS[1], s)
end
return tonumber(s.token)
