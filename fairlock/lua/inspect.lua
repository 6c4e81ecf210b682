-- inspect: read the fair lock's state, drawing the token of a plain hold.
-- KEYS[1] lock key (see codec.lua); KEYS[2] queue, KEYS[3] expiry (see
-- queue.lua); KEYS[4] fence key (see fence.lua).
-- ARGV: the header (see codec.lua), of which the owner whose hold count
-- and queue position to report ('' for none) and the fence ttl count.
-- Reply: {held (0/1), that owner's hold count, remaining ms of the hold
-- (until its end in the end form, see codec.lua; -2 if free, -1 if no
-- expiry), token (the hold's; the last one drawn if free, 0 if
-- none is known), holder's owner id ('' if free), holder's hold count,
-- live waiters queued, that owner's position in the queue (1 at the head,
-- 0 if not queued), the hold's id ('' if free)}. A plain hold draws its
-- token (see fence.lua), so that the token reported names the hold.
local s = load(KEYS[1])
if s.foreign then
  return unexpected(KEYS[1], s.foreign)
end
if s.owner and not s.token then
  store(KEYS[1], s)
end
local now_ms = now()
local last = s.token
if not s.owner and not last then
  last = last_token(KEYS[4])
end
local out = {0, 0, -2, last or '0', '', 0, redis.call('ZCOUNT', KEYS[3], '(' .. now_ms, '+inf'), 0, ''}
if s.owner then
  out[1], out[3], out[5], out[6], out[9] = 1, hold_left(KEYS[1], s), s.owner, s.count, s.id
  if s.owner == ARGV[1] then
    out[2] = s.count
  end
end
if ARGV[1] ~= '' and out[7] > 0 then
  local pos = 0
  for _, w in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
    local exp = redis.call('ZSCORE', KEYS[3], w)
    if exp and tonumber(exp) > now_ms then
      pos = pos + 1
      if entry_owner(w) == ARGV[1] then
        out[8] = pos
        break
      end
    end
  end
end
return out
