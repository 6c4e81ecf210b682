-- Fencing tokens. A hold's token is drawn by the first script that needs
-- it (the one that grants the hold, or for a plain hold, see codec.lua,
-- the first that reads, flags or re-enters it), as one more than the last
-- token drawn for the primitive. The last token is known while the main
-- key holds a hold or a free marker, and in the primitive's fence key
-- (see draw), which each draw writes, for the fence ttl after it (the
-- election keeps it in its leader hash). When neither knows it, the next
-- token is seeded from the server clock in microseconds, which is greater
-- than every earlier token unless the clock stepped back by more than the
-- time since that token was drawn: tokens grow by one per draw, and a
-- script call, which reads the clock once (see now), runs longer than a
-- microsecond for each token it draws, a second seed within it following
-- the first. A plain hold, which draws no token, writes nothing but its
-- own key: the cheapest acquisition pays nothing for fencing until a
-- token is asked for.

-- seeded is the last token this script call seeded from the clock. The
-- script reads the clock once (see now), so that a second seed in the
-- same call follows the first instead of repeating it.
local seeded

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
  if last then
    return string.format('%d', tonumber(last) + 1)
  end
  if not now_us then
    local _
    _, now_us = now()
  end
  if seeded and now_us <= seeded then
    now_us = seeded + 1
  end
  seeded = now_us
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

-- last_token returns the last token the fence key keeps, or nil; a key
-- that holds something else counts as none (inspection reads, and never
-- fails, for it).
local function last_token(fence)
  local v = redis.pcall('GET', fence)
  if type(v) == 'string' and tonumber(v) then
    return v
  end
  return nil
end
