-- inspect: read the mutex's state.
-- KEYS[1] lock key (see load).
-- ARGV[1] owner id whose hold count to report ('' for none).
-- Reply: {held (0/1), that owner's hold count, remaining ms (-2 if free,
-- -1 if no expiry)}.
local s = load(KEYS[1])
if not s.owner then
  return {0, 0, -2}
end
local count = 0
if s.owner == ARGV[1] then
  count = s.count
end
return {1, count, redis.call('PTTL', KEYS[1])}
