-- read_release: undo one read hold of the owner; the last read hold of
-- the lock passes it on (see pass_on).
-- KEYS: see rw.lua.
-- ARGV[1] owner id; ARGV[2] operation id, the same on every retry of one
-- release; ARGV[3] lease ms restored on a partial release ('0' for a fixed
-- lease); ARGV[4] wake channel base; ARGV[5] the caller's process id;
-- ARGV[6] the id of the hold it may release; ARGV[7] 'r' if readers are
-- preferred, else 'w'; ARGV[8] the hold's token.
-- Reply: 0 when the owner's only read hold, the lock's only hold, which
-- nothing waited behind, was released; otherwise {the owner's remaining
-- read hold count, or -1 if it holds none of that hold; the id of the
-- hold ('' if none)}, followed by the address, token and owner id of each
-- waiter the lock was handed to.
local owner, op, id = ARGV[1], ARGV[2], ARGV[6]
-- The common case, a lone reader's last release: one write, which reads
-- the state it replaces. Anything else is put back as it was, expiry
-- included, and handled below. A write the server refused (W of another
-- type, or out of memory) changed nothing: W is read again, and the
-- release writes only what it must, which fails then if it still cannot.
local v = redis.pcall('SET', KEYS[1], ARGV[8] .. ' free', 'KEEPTTL', 'GET')
if v == ARGV[8] .. ' r 1 ' .. owner .. ' ' .. id .. ' ' .. id then
  return 0
end
-- (library parts: see newScript)
if type(v) == 'table' then
  if refused(v) then
    v = redis.pcall('GET', W)
  end
elseif type(v) == 'string' then
  redis.call('SET', W, v, 'KEEPTTL')
else
  redis.call('DEL', W)
end
local s = rw_decode(v)
if s.kind == 'read' then
  if s.owner ~= owner or s.id ~= id then
    return {-1, ''}
  end
  if seen(s.ops, op) then
    return {s.count, s.id}
  end
  if s.count > 1 then
    s.count = s.count - 1
    s.ops = remember(s.ops, op, now_s(), op_memory)
    local ttl = tonumber(ARGV[3])
    if ttl > 0 and ttl > redis.call('PTTL', W) then
      redis.call('SET', W, lone_read_value(s), 'PX', ttl)
    else
      redis.call('SET', W, lone_read_value(s), 'KEEPTTL')
    end
    return {s.count, s.id}
  end
  redis.call('SET', W, s.token .. ' free', 'KEEPTTL')
  return {0, s.id}
end
-- The read holds are in R and RX. A W that dsync did not write does not
-- keep the owner from giving its read hold back.
local now_ms, now_us = now()
local r = load_reader(owner, now_ms)
if not r or r.id ~= id then
  return {-1, ''}
end
if seen(r.ops, op) then
  return {r.count, r.id}
end
if r.count > 1 then
  r.count = r.count - 1
  r.ops = remember(r.ops, op, math.floor(now_ms / 1000), op_memory)
  local exp = math.max(r.exp, now_ms + tonumber(ARGV[3]))
  store_reader(owner, r, exp, now_ms)
  if s.kind == 'shared' then
    expire_at_least(W, exp - now_ms)
  end
  return {r.count, r.id}
end
drop_reader(owner)
local out = {0, r.id}
if s.kind == 'shared' or s.kind == 'missing' then
  if redis.call('ZCOUNT', RX, '(' .. now_ms, '+inf') > 0 then
    -- Other readers hold it: a waiting writer waits for them.
    if s.kind == 'missing' then
      rw_settle(nil, now_ms, now_us)
    end
    return out
  end
  pass_and_settle(out, false, {channel = ARGV[4], process = ARGV[5], prefer = ARGV[7], last = s.token}, now_ms, now_us)
end
return out
