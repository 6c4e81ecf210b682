-- Fencing tokens. Every hold of a primitive gets a token one above the
-- last one handed out, in the script that grants the hold. The last token
-- is kept twice: by the primitive's main key while it is free (see the
-- primitive's state), and in a fence key, for the fence ttl after the last
-- grant, which outlives a hold whose lease runs out, a deleted main key and
-- a server clock that steps back (a failover to a replica that lags). Only
-- when both are missing is the next token seeded from the server clock in
-- microseconds, which is greater than every earlier token unless the clock
-- stepped back: tokens grow by one per hold, and no two holds start within
-- a microsecond.

-- next_token returns the token that follows last (a string or nil, the
-- last token the main key knows), reading the fence key if last is nil;
-- now_us, if known, spares reading the clock.
-- A fence key that holds something else fails the script before it wrote
-- anything: callers take the token first.
local function next_token(last, fence, now_us)
  last = last or redis.pcall('GET', fence)
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
  return string.format('%d', now_us)
end

-- record_token keeps token at fence for fence_ttl ms.
local function record_token(fence, token, fence_ttl)
  redis.call('SET', fence, token, 'PX', fence_ttl)
end
