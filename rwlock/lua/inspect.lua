-- inspect: read the lock's state.
-- KEYS: see rw.lua.
-- ARGV[1] owner id whose holds to report ('' for none).
-- Reply: {write holder's owner id ('' if none), its write hold count,
-- remaining ms of the write hold (-2 if none, -1 if no expiry), token of
-- the write hold (the last one handed out if none; 0 if none is known),
-- live read holds (one per owner), that owner's write hold count, that
-- owner's read hold count, live writers queued, live readers waiting,
-- the write hold's id ('' if none)}.
local now_ms = now()
local s = load(W)
if s.foreign then
  return unexpected(W, s.foreign)
end
local out = {'', 0, -2, current_token(s.token), redis.call('ZCOUNT', RX, '(' .. now_ms, '+inf'), 0, 0,
  redis.call('ZCOUNT', WX, '(' .. now_ms, '+inf'), redis.call('ZCOUNT', RW, '(' .. now_ms, '+inf'), ''}
if s.owner then
  out[1], out[2], out[3], out[4], out[10] = s.owner, s.count, redis.call('PTTL', W), s.token, s.id
  if s.owner == ARGV[1] then
    out[6] = s.count
  end
end
if ARGV[1] ~= '' then
  local r = load_reader(ARGV[1], now_ms)
  if r then
    out[7] = r.count
  end
end
return out
