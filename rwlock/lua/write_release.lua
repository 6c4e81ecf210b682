-- write_release: undo one write hold of the owner; the last one passes
-- the lock on (see pass_on).
-- KEYS: see rw.lua.
-- ARGV: the header (see codec.lua), with the hold's id and plain value;
-- ARGV[12] 'r' if readers are preferred, else 'w'.
-- Reply: 0 when the owner's only write hold, which nothing waited behind,
-- was released; otherwise {the owner's remaining write hold count, or -1
-- if it holds none of that hold; the id of the hold ('' if none)},
-- followed by each waiter the lock was handed to (see hand_to).
local v = redis.pcall('GET', KEYS[1])
if v == ARGV[4] then
  -- The common case: a lone writer's plain hold, with nothing else on the
  -- lock.
  redis.call('DEL', KEYS[1])
  return 0
end
-- dsync:library
local a = rw_header()
local owner, op, id = a.owner, a.op, a.id
local s = rw_load(v)
if s.foreign then
  return unexpected(W, s.foreign)
end
if s.kind ~= 'write' or s.owner ~= owner or s.id ~= id then
  return {-1, ''}
end
if seen(s.ops, op) then
  return {s.count, s.id}
end
if s.count > 1 then
  s.count = s.count - 1
  s.ops = remember(s.ops, op, now_s(), op_memory)
  store_extending(W, s, a.lease)
  return {s.count, s.id}
end
s.token = rw_vacate(s.token)
local out = {0, s.id}
local now_ms, now_us = now()
a.prefer, a.last = ARGV[12], s.token
pass_and_settle(out, true, a, now_ms, now_us)
return out
