-- write_release: undo one write hold of the owner; the last one passes
-- the lock on (see pass_on).
-- KEYS: see rw.lua.
-- ARGV[1] owner id; ARGV[2] operation id, the same on every retry of one
-- release; ARGV[3] lease ms restored on a partial release ('0' for a fixed
-- lease); ARGV[4] wake channel base; ARGV[5] the caller's process id;
-- ARGV[6] the id of the hold it may release; ARGV[7] 'r' if readers are
-- preferred, else 'w'; ARGV[8] the hold's token.
-- Reply: 0 when the owner's only write hold, which nothing waited behind,
-- was released; otherwise {the owner's remaining write hold count, or -1
-- if it holds none of that hold; the id of the hold ('' if none)},
-- followed by the address, token and owner id of each waiter the lock was
-- handed to.
local owner, op, id = ARGV[1], ARGV[2], ARGV[6]
-- The common case, a lone writer's last release: one write, which reads
-- the state it replaces. Anything else is put back as it was, expiry
-- included, and handled below. A write the server refused (W of another
-- type, or out of memory) changed nothing: W is read again, and the
-- release writes only what it must, which fails then if it still cannot.
local v = redis.pcall('SET', KEYS[1], ARGV[8] .. ' free', 'KEEPTTL', 'GET')
if v == ARGV[8] .. ' 1 0 ' .. owner .. ' ' .. id .. ' ' .. id then
  return 0
end
-- (library parts: see newScript)
local wrote = type(v) ~= 'table'
if refused(v) then
  v = redis.pcall('GET', W)
end
local s = rw_decode(v)
if wrote and not v then
  redis.call('DEL', W)
elseif wrote and (s.kind ~= 'write' or s.owner ~= owner or s.id ~= id or s.count > 1 or seen(s.ops, op)) then
  redis.call('SET', W, v, 'KEEPTTL')
end
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
  store_extending(W, s, ARGV[3])
  return {s.count, s.id}
end
rw_vacate(s.token)
local out = {0, s.id}
local now_ms, now_us = now()
pass_and_settle(out, true, {channel = ARGV[4], process = ARGV[5], prefer = ARGV[7], last = s.token}, now_ms, now_us)
return out
