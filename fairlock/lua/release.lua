-- release: undo one hold of the owner; the last one hands the fair lock to
-- the head of the queue (see hand_off, pop_head).
-- KEYS[1] lock key (see load); KEYS[2] queue, KEYS[3] expiry (see
-- queue.lua).
-- ARGV[1] owner id; ARGV[2] operation id, the same on every retry of one
-- release, so that a retry after a lost reply does not release twice;
-- ARGV[3] lease ms, restored on a partial release ('0' for a fixed lease,
-- which a release never extends); ARGV[4] wake channel base; ARGV[5] the
-- caller's process id (see hand_off); ARGV[6] the id of the hold to
-- release: another hold of the same owner (a retry landing after the
-- owner's next acquisition) is not released; ARGV[7] its fencing token.
-- Reply: 0 when the owner's only hold, which nobody queued behind, was
-- released; otherwise {the owner's remaining hold count, or -1 if the
-- owner holds nothing; the id of the hold ('' if none)}, followed by the
-- waiter's address, token and owner id when the lock was handed to a
-- waiter.
local lock, queue, expiry = KEYS[1], KEYS[2], KEYS[3]
local owner, op, id = ARGV[1], ARGV[2], ARGV[6]
-- The common case, a final release of a hold nobody queued behind: one
-- write, which reads the state it replaces. Anything else is put back as
-- it was, expiry included, and handled below. A write the server refused
-- (the key of another type, or out of memory) changed nothing: the key is
-- read again, and the release writes only what it must, which fails then
-- if it still cannot.
local v = redis.pcall('SET', lock, ARGV[7] .. ' free', 'KEEPTTL', 'GET')
if v == ARGV[7] .. ' 1 0 ' .. owner .. ' ' .. id .. ' ' .. id then
  return 0
end
-- (library parts: see newScript)
if type(v) == 'table' then
  if refused(v) then
    v = redis.pcall('GET', lock)
  end
elseif type(v) == 'string' then
  redis.call('SET', lock, v, 'KEEPTTL')
else
  redis.call('DEL', lock)
end
local s = decode(lock, v)
if s.foreign then
  return unexpected(lock, s.foreign)
end
if s.owner ~= owner or s.id ~= id then
  return {-1, ''}
end
if seen(s.ops, op) then
  return {s.count, s.id}
end
if s.count > 1 then
  s.count = s.count - 1
  s.ops = remember(s.ops, op, now_s(), op_memory)
  store_extending(lock, s, ARGV[3])
  return {s.count, s.id}
end
return {0, s.id, hand_off(lock, nil, s, ARGV[4], nil, ARGV[5], function() return pop_head(queue, expiry) end)}
