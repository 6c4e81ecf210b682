-- release: undo one hold of the owner; the last one frees the mutex and
-- hands it to the next waiter (see hand_off).
-- KEYS[1] lock key (see load); KEYS[2] waiter set.
-- ARGV[1] owner id; ARGV[2] operation id, the same on every retry of one
-- release, so that a retry after a lost reply does not release twice;
-- ARGV[3] the id of the hold to release (another hold of the same owner,
-- which a retry landing after the owner's next acquisition would find, is
-- not released); ARGV[4] its fencing token; ARGV[5] lease ms, restored on
-- a partial release ('0' for a fixed lease, which a release never
-- extends); ARGV[6] wake channel base; ARGV[7] the caller's hub id (see
-- hand_off); ARGV[8] waiter entry ttl ms; ARGV[9...] entries of waiters of
-- the caller's session queued behind this hold (see Lease.Enqueue),
-- registered in order before anything else.
-- Reply: the owner's remaining hold count, 0 when the mutex was freed
-- without a waiter to hand it to; otherwise {that count, or -1 if the
-- owner does not hold that hold; the hold's id ('' if none)}, followed by
-- the waiter's address, token and owner id when the mutex was handed to a
-- waiter, which the caller wakes if it is in its hub.
local lock, waiters = KEYS[1], KEYS[2]
local owner, op, id = ARGV[1], ARGV[2], ARGV[3]
if #ARGV == 8 then
  -- The common case, a final release of a hold nobody waits behind: one
  -- write, which reads the state it replaces, before the library is even
  -- defined. Anything else is put back as it was, expiry included, and
  -- handled below.
  local v = redis.pcall('SET', lock, ARGV[4] .. ' free', 'KEEPTTL', 'GET')
  if v == ARGV[4] .. ' 1 0 ' .. owner .. ' ' .. id .. ' ' .. id then
    return 0
  end
  if type(v) == 'string' then
    redis.call('SET', lock, v, 'KEEPTTL')
  elseif not v then
    redis.call('DEL', lock)
  end
end
-- dsync:library
local pop = function() return pop_waiter(waiters) end
local s = load(lock)
if s.foreign then
  return unexpected(lock, s.foreign)
end
local queued = #ARGV > 8
if queued then
  local now_ms = now()
  local expiry = now_ms + tonumber(ARGV[8])
  for i = 9, #ARGV do
    -- Thousandths of a ms keep arrival order among equal expiries.
    redis.call('ZADD', waiters, string.format('%.3f', expiry + (i - 9) / 1000), ARGV[i])
  end
  expire_at_least(waiters, ARGV[8])
  if not s.owner then
    -- The hold is gone (its lease ran out): nobody else would wake them.
    return {-1, '', hand_off(lock, nil, s, ARGV[6], nil, ARGV[7], pop)}
  end
  s.waiting = true
end
if s.owner ~= owner or s.id ~= id or seen(s.ops, op) then
  if queued then
    store(lock, s) -- whoever releases this hold must look for them
  end
  if s.owner ~= owner or s.id ~= id then
    return {-1, ''}
  end
  return {s.count, s.id}
end
if s.count > 1 then
  s.count = s.count - 1
  s.ops = remember(s.ops, op, now_s(), op_memory)
  store_extending(lock, s, ARGV[5])
  return {s.count, s.id}
end
return {0, s.id, hand_off(lock, nil, s, ARGV[6], nil, ARGV[7], pop)}
