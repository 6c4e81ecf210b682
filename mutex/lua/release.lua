-- release: undo one hold of the owner; the last one frees the mutex and
-- hands it to the next waiter (see hand_off).
-- KEYS[1] lock key (see load); KEYS[2] waiter set; KEYS[3] fence key.
-- ARGV[1] owner id; ARGV[2] operation id, the same on every retry of one
-- release, so that a retry after a lost reply does not release twice;
-- ARGV[3] lease ms, restored on a partial release ('0' for a fixed lease,
-- which a release never extends); ARGV[4] wake channel base; ARGV[5] fence
-- ttl ms (see free, grant); ARGV[6] the caller's process id (see
-- hand_off); ARGV[7] waiter entry ttl ms; ARGV[8] the ids of the holds it
-- may release, space-separated (one, unless the caller does not know which
-- of its owner's holds is on this server): another hold of the same owner
-- (a retry landing after the owner's next acquisition) is not released; ARGV[9...] entries of waiters
-- of the caller's process queued behind this hold (see mutex/local.go),
-- registered in order before anything else.
-- Reply: {the owner's remaining hold count, or -1 if the owner holds
-- nothing; the id of the hold ('' if none)}, followed by the waiter's
-- address, token and owner id when the mutex was handed to a waiter,
-- which the caller wakes if it is in its process.
local lock, waiters = KEYS[1], KEYS[2]
local owner, op = ARGV[1], ARGV[2]
local pop = function() return pop_waiter(waiters) end
local s = load(lock)
if s.foreign then
  return unexpected(lock, s.foreign)
end
local queued = #ARGV > 8
if queued then
  local now_ms = now()
  local expiry = now_ms + tonumber(ARGV[7])
  for i = 9, #ARGV do
    -- Thousandths of a ms keep arrival order among equal expiries.
    redis.call('ZADD', waiters, string.format('%.3f', expiry + (i - 9) / 1000), ARGV[i])
  end
  expire_at_least(waiters, ARGV[7])
  if not s.owner then
    -- The hold is gone (its lease ran out): nobody else would wake them.
    return {-1, '', hand_off(lock, KEYS[3], s, ARGV[4], ARGV[5], ARGV[6], pop)}
  end
  s.waiting = true
end
if s.owner ~= owner or not listed(ARGV[8], s.id) or seen(s.ops, op) then
  if queued then
    store(lock, s) -- whoever releases this hold must look for them
  end
  if s.owner ~= owner or not listed(ARGV[8], s.id) then
    return {-1, ''}
  end
  return {s.count, s.id}
end
if s.count > 1 then
  s.count = s.count - 1
  s.ops = remember(s.ops, op, now_s(), op_memory)
  store_extending(lock, s, ARGV[3])
  return {s.count, s.id}
end
return {0, s.id, hand_off(lock, KEYS[3], s, ARGV[4], ARGV[5], ARGV[6], pop)}
