-- Fencing tokens. Every hold of a primitive gets a token one above the
-- last one handed out, in the script that grants the hold, which finds
-- the last token at the primitive's main key: while held, and after a
-- release for as long as the primitive keeps it there (see the
-- primitive's state). A primitive may also keep it in a fence key, for the
-- fence ttl after each grant, which outlives a hold whose lease runs out,
-- a deleted main key and a server clock that steps back (a failover to a
-- replica that lags); none does now, as a key written on every grant is
-- too dear for what it buys (see package fairlock). When neither is
-- there, the next token is seeded
-- from the server clock in microseconds, which is greater than every
-- earlier token unless the clock stepped back by more than the time since
-- that token was handed out: tokens grow by one per hold, and no two
-- holds start within a microsecond.

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
  return string.format('%d', now_us)
end

-- record_token keeps token at fence for fence_ttl ms.
local function record_token(fence, token, fence_ttl)
  redis.call('SET', fence, token, 'PX', fence_ttl)
end
