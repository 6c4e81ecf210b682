-- Fencing tokens. A hold's token is drawn by the first script that needs
-- it (the one that grants the hold, or for a plain hold, see codec.lua,
-- the first that reads, flags or re-enters it), as one more than the last
-- token the primitive knows, or the server clock in microseconds if that
-- is greater:
--
--   token = max(last + 1, server time in µs)
--
-- The last token is known while the main key holds a hold or a free
-- marker, and in the primitive's fence key (see draw), which each draw
-- writes, for the fence ttl after it (the election keeps it in its leader
-- hash). So tokens strictly increase while the fence key lasts, whatever
-- the clock, and after that as long as the server clock does not step back
-- by more than the time since the last token was drawn. A plain hold,
-- which draws no token, writes nothing but its own key: the cheapest
-- acquisition pays nothing for fencing until a token is asked for.

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

-- draw returns the token that follows last (see next_token), for a script
-- called with the header (see codec.lua): with a fence ttl there, the
-- fence key, the last of KEYS, seeds it when last is nil and keeps it.
local function draw(last, now_us)
  local ttl = ARGV[11]
  if ttl == nil or ttl == '0' or ttl == '' then
    return next_token(last, nil, now_us)
  end
  local fence = KEYS[#KEYS]
  local token = next_token(last, fence, now_us)
  record_token(fence, token, ttl)
  return token
end
