-- inspect: read the mutex's state.
-- KEYS[1] lock hash.
-- ARGV[1] owner id whose hold count to report ('' for none).
-- Reply: {held (0/1), that owner's hold count, remaining ms (-2 if free,
-- -1 if no expiry)}.
local h = redis.call('HMGET', KEYS[1], 'owner', 'count')
if h[1] == false then
  return {0, 0, -2}
end
local count = 0
if h[1] == ARGV[1] then
  count = tonumber(h[2])
end
return {1, count, redis.call('PTTL', KEYS[1])}
