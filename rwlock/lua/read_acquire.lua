-- read_acquire: take or re-enter a read hold.
-- KEYS: see rw.lua.
-- ARGV: the header (see codec.lua); ARGV[12] 'r' if readers are preferred,
-- else 'w'.
-- Reply: an attempt's (see codec.lua).
--
-- A read hold is granted to an owner that has one (a re-entry) or holds
-- the write lock (a downgrade), else only while no write hold is held
-- and, unless readers are preferred, no live writer waits.
-- W exists whenever anything else is on the lock (see rw.lua): where it is
-- missing, a plain SET NX, the client's or this script's, takes the lock
-- as its lone reader.
if ARGV[10] == '0' and redis.call('SET', KEYS[1], ARGV[4], 'NX', 'PX', ARGV[5]) then
  -- The common case: nothing is on the lock, and a plain SET takes it.
  return 0
end
-- dsync:library
local a = rw_header()
local owner, op, lease, entry, registered = a.owner, a.op, tonumber(a.lease), a.entry, a.registered
local v = redis.pcall('GET', W)
local s = rw_load(v)
if s.foreign then
  return unexpected(W, s.foreign)
end
local now_ms, now_us = now()
s = readers_due(a, s, now_ms, now_us)
if s.kind == 'read' and s.owner == owner then
  -- A re-entry of the lone read hold, or a retry.
  if not seen(s.ops, op) then
    s.count = s.count + 1
  end
  s.ops = remember(s.ops, op, math.floor(now_ms / 1000), acquisition_memory(lease))
  local left = math.max(redis.call('PTTL', W), lease)
  redis.call('SET', W, lone_read_value(s), 'PX', left)
  if registered then
    redis.call('ZREM', RW, entry)
  end
  return {1, s.count, s.token, s.id, left}
end
if s.kind == 'missing' and not rw_busy(now_ms) then
  -- Nothing else is there (see rw.lua): a waiter's own stale entry at
  -- most. A lock that lost its token draws one, as every hold needs one.
  if registered then
    redis.call('ZREM', RW, entry)
  end
  local token = s.token or draw(nil, now_us)
  redis.call('SET', W, lone_read_value({token = token, count = 1, owner = owner, id = op, ops = op}), 'PX', lease)
  return tonumber(token)
end
if s.kind == 'read' then
  s = rw_unfold(s, now_ms) -- another owner's lone read hold
end
-- Beside another owner's write hold, rw_load dropped this owner's read
-- hold, which was lost with W.
local r = load_reader(owner, now_ms)
if r then
  if not seen(r.ops, op) then
    r.count = r.count + 1
  end
  r.ops = remember(r.ops, op, math.floor(now_ms / 1000), acquisition_memory(lease))
  local exp = math.max(r.exp, now_ms + lease)
  -- The waiter leaves first: a waiters' key of the wrong type fails the
  -- script before it wrote a hold that its owner would not hear of.
  if registered then
    redis.call('ZREM', RW, entry)
  end
  store_reader(owner, r, exp, now_ms)
  rw_keep(s, exp - now_ms, now_ms, now_us)
  return {1, r.count, r.token, r.id, exp - now_ms}
end
local blocked, retry = false, -1
if s.kind == 'write' and s.owner ~= owner then
  blocked, retry = true, hold_left(W, s)
elseif s.kind ~= 'write' and ARGV[12] ~= 'r' then
  local h = head(WQ, WX, now_ms)
  if h then
    blocked = true
    purge_readers(now_ms)
    if redis.call('EXISTS', RX) == 0 then
      -- Nothing holds the lock: the head writer, which may be sleeping out
      -- its heartbeat, is due.
      wake(a.channel, h)
    end
  end
end
if blocked then
  local token = s.token
  if entry ~= '' then
    register(RW, entry, now_ms, a.entry_ttl)
    token = rw_keep(s, a.entry_ttl, now_ms, now_us)
  elseif s.kind == 'missing' then
    token = rw_settle(s.token, now_ms, now_us)
  end
  return not_acquired(retry, token)
end
-- A read hold fences nothing: it starts with the last token, and only a
-- lock that lost it draws one. After a downgrade (the owner's write hold
-- in W), the write hold's release must see this read hold, and no plain
-- writer may take W while it lives, whenever the write hold ends: the
-- write hold takes the end form, and W outlives the read hold (rw_keep).
if s.kind == 'write' and not s.token then
  store(W, s) -- a plain write hold draws its token first
end
if registered then
  redis.call('ZREM', RW, entry) -- first, as above
end
r = {token = s.token or draw(nil, now_us), count = 1, id = op, ops = op}
store_reader(owner, r, now_ms + lease, now_ms)
s.token = s.token or r.token
rw_keep(s, lease, now_ms, now_us)
return tonumber(r.token)
