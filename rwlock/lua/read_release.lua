-- read_release: undo one read hold of the owner; the last read hold of
-- the lock passes it on (see pass_on).
-- KEYS: see rw.lua.
-- ARGV: the header (see codec.lua), with the hold's id and plain value;
-- ARGV[12] 'r' if readers are preferred, else 'w'.
-- Reply: 0 when the owner's only read hold, the lock's only hold, which
-- nothing waited behind, was released; otherwise {the owner's remaining
-- read hold count, or -1 if it holds none of that hold; the id of the
-- hold ('' if none)}, followed by each waiter the lock was handed to (see
-- hand_to).
local v = redis.pcall('GET', KEYS[1])
if v == ARGV[4] then
  -- The common case: a lone reader's plain hold, with nothing else on the
  -- lock.
  redis.call('DEL', KEYS[1])
  return 0
end
-- dsync:library
local a = rw_header()
local owner, op, id = a.owner, a.op, a.id
local s = rw_load(v)
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
    local ttl = tonumber(a.lease)
    if ttl > 0 and ttl > redis.call('PTTL', W) then
      redis.call('SET', W, lone_read_value(s), 'PX', ttl)
    else
      redis.call('SET', W, lone_read_value(s), 'KEEPTTL')
    end
    return {s.count, s.id}
  end
  redis.call('DEL', W)
  return {0, s.id}
end
-- The read holds are in R and RX. A W that dsync did not write does not
-- keep the owner from giving its read hold back. Beside another owner's
-- write hold, rw_load dropped the read hold, which was lost with W (a
-- plain writer took it after it was deleted or evicted), as its renewal
-- would find (renew_read.lua).
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
  local exp = math.max(r.exp, now_ms + tonumber(a.lease))
  store_reader(owner, r, exp, now_ms)
  if s.kind == 'shared' or s.kind == 'write' then -- the owner's (see above)
    rw_keep(s, exp - now_ms, now_ms, now_us)
  end
  return {r.count, r.id}
end
drop_reader(owner)
local out = {0, r.id}
if s.kind == 'write' then
  -- The owner's write hold (a downgrade) no longer keeps W for this read
  -- hold.
  leave_turn(W, s, a.turn)
elseif s.kind == 'shared' or s.kind == 'missing' then
  -- A write hold that ran out (ended: the owner's, behind which this read
  -- hold was a downgrade) is passed on as its release would have: to the
  -- readers that waited it out first (see readers_due).
  if not s.ended and redis.call('ZCOUNT', RX, '(' .. now_ms, '+inf') > 0 then
    -- Other readers hold it: a waiting writer waits for them.
    if s.kind == 'missing' then
      rw_settle(nil, now_ms, now_us)
    end
    return out
  end
  a.prefer, a.last = ARGV[12], s.token
  pass_and_settle(out, s.ended == true, a, now_ms, now_us)
end
return out
