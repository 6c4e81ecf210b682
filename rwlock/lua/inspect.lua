-- inspect: read the lock's state.
-- KEYS: see rw.lua.
-- ARGV: the header (see codec.lua), of which the owner whose holds to
-- report ('' for none) and the fence ttl count.
-- Reply: {write holder's owner id ('' if none), its write hold count,
-- remaining ms of the write hold (until its end in the end form, see
-- rw.lua; -2 if none, -1 if no expiry), token of
-- the write hold (0 if not drawn yet; the last one handed out if none, 0
-- if none is known; see fence.lua: a plain write hold draws its token),
-- live read holds (one per owner), that owner's write hold count, that
-- owner's read hold count, live writers queued, live readers waiting,
-- the write hold's id ('' if none)}.
-- It loads W as the scripts that write do (rw_load): read holds lost with
-- a deleted W are dropped, not reported beside the writer that took it.
local now_ms = now()
local s = rw_load(redis.pcall('GET', W))
if s.foreign then
  return unexpected(W, s.foreign)
end
if s.kind == 'write' and not s.token then
  store(W, s)
end
local last = s.token
if s.kind ~= 'write' and not last then
  last = last_token(KEYS[7])
end
local out = {'', 0, -2, last or '0', redis.call('ZCOUNT', RX, '(' .. now_ms, '+inf'), 0, 0,
  redis.call('ZCOUNT', WX, '(' .. now_ms, '+inf'), redis.call('ZCOUNT', RW, '(' .. now_ms, '+inf'), ''}
if s.kind == 'write' then
  out[1], out[2], out[3], out[10] = s.owner, s.count, hold_left(W, s), s.id
  if s.owner == ARGV[1] then
    out[6] = s.count
  end
elseif s.kind == 'read' then
  out[5] = out[5] + 1
  if s.owner == ARGV[1] then
    out[7] = s.count
  end
end
if ARGV[1] ~= '' and s.kind ~= 'read' then
  local r = load_reader(ARGV[1], now_ms)
  if r then
    out[7] = r.count
  end
end
return out
