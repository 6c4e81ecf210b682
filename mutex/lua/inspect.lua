-- inspect: read the mutex's state.
-- KEYS[1] lock key (see load); KEYS[2] waiter set.
-- ARGV[1] owner id whose hold count to report ('' for none); ARGV[2] how
-- many waiters to name.
-- Reply: {held (0/1), that owner's hold count, remaining ms (-2 if free,
-- -1 if no expiry), token (the last one if free, 0 if none), holder's owner
-- id ('' if free), holder's hold count, live waiters, the hold's id ('' if
-- free), then the owner ids of up to ARGV[2] waiters in the order a
-- release would pick them}.
local s = load(KEYS[1])
if s.foreign then
  return unexpected(KEYS[1], s.foreign)
end
local now_ms = now()
local out = {0, 0, -2, s.token or '0', '', 0, redis.call('ZCOUNT', KEYS[2], '(' .. now_ms, '+inf'), ''}
if s.owner then
  out[1], out[3], out[5], out[6], out[8] = 1, redis.call('PTTL', KEYS[1]), s.owner, s.count, s.id
  if s.owner == ARGV[1] then
    out[2] = s.count
  end
end
local n = tonumber(ARGV[2])
if n > 0 and out[7] > 0 then
  for _, w in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. now_ms, '+inf', 'LIMIT', 0, n)) do
    out[#out + 1] = string.match(w, '|([^|]*)$') or ''
  end
end
return out
