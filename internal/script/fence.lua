-- Fencing tokens. A hold's token is drawn by the first script that needs
-- it (the one that grants the hold, or for a plain hold, see codec.lua,
-- the first that reads, flags or re-enters it), as the server clock in
-- microseconds, or one more than the last token the primitive knows if
-- that is not less:
--
--   token = max(last + 1, server time in µs)
--
-- The last token is known while the main key holds a hold or a free
-- marker (and, for the election, in its leader hash). Tokens strictly
-- increase as long as the server clock does not step back: a token drawn
-- after another is at least the clock when drawn, which has moved on,
-- since no two holds of one name are drawn within the same microsecond
-- (each takes a script of its own, and one script alone takes longer),
-- and at least one more than the last one where the key remembers it. A
-- clock that steps back by more than the time since the last token was
-- drawn (a failover to a replica whose clock lags), with the main key gone,
-- could repeat a token.

-- next_token returns the token that follows last (a string or nil, the
-- last token the main key knows), reading the fence key (if not nil) when
-- last is nil; now_us, if known, spares reading the clock.
-- A fence key that holds something else fails the script before it wrote
-- anything: callers take the token first.
local function next_token(last, fence, now_us)
  if not last and fence then
    last = redis.pcall('GET', fence)
  end
  if type(last) == 'table' or (last and not tonumber(last)) then
    error('DSYNC unexpected value at ' .. fence)
  end
  if not now_us then
    local _
    _, now_us = now()
  end
  if last and tonumber(last) >= now_us then
    return string.format('%d', tonumber(last) + 1)
  end
  return string.format('%d', now_us)
end

-- record_token keeps token at fence for fence_ttl ms.
local function record_token(fence, token, fence_ttl)
  redis.call('SET', fence, token, 'PX', fence_ttl)
end
