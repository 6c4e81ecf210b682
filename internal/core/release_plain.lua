-- release_plain: the release of a plain hold (see codec.lua), which every
-- primitive's release script starts with, sent alone with only what it
-- reads, so that the common case costs the server no more than a
-- compare-and-delete. Anything else is the primitive's release script's.
-- KEYS[1] the primitive's main key.
-- ARGV[1] the hold's plain value.
-- Reply: 1 if KEYS[1] held the plain value, now deleted; else 0, and
-- nothing changed.
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
