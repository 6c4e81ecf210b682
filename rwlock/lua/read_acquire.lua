-- read_acquire: take or re-enter a read hold.
-- KEYS: see rw.lua.
-- ARGV[1] owner id; ARGV[2] operation id, the same on every retry of one
-- acquisition, so that a retry after a lost reply does not count twice;
-- ARGV[3] lease ms; ARGV[4] waiter entry (see hand_off in exclusive.lua),
-- '' not to register on failure; ARGV[5] waiter timeout ms; ARGV[6] '1' if
-- an earlier attempt registered the waiter; ARGV[7] wake channel base;
-- ARGV[8] 'r' if readers are preferred, else 'w'.
-- Reply: the token of a new read hold that the operation took for the
-- lease asked; {1, the owner's read hold count, token, hold id, remaining
-- ms of the hold} when held otherwise; {0, remaining ms of the write hold
-- that blocks it (-1 if unknown), the last token ('0' if none)} when not.
--
-- A read hold is granted to an owner that has one (a re-entry) or holds
-- the write lock (a downgrade), else only while no write hold is held
-- and, unless readers are preferred, no live writer waits.
local owner, op, lease, entry, registered = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[6] == '1'
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'string' and not registered then
  -- The common case, a lock freed by a lone holder: one read, one write.
  -- A read hold taken directly starts with the last token.
  local last = string.match(v, '^(%d+) free$')
  if last then
    redis.call('SET', KEYS[1], last .. ' r 1 ' .. owner .. ' ' .. op .. ' ' .. op, 'PX', ARGV[3])
    return tonumber(last)
  end
end
-- (library parts: see newScript)
local s = rw_decode(v)
if s.foreign then
  return unexpected(W, s.foreign)
end
local now_ms, now_us = now()
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
if s.kind == 'free' or (s.kind == 'missing' and not rw_busy(now_ms)) then
  -- Nothing else is there (see rw.lua): a waiter's own stale entry at
  -- most. A lock that lost its token draws one, as every hold needs one.
  if registered then
    redis.call('ZREM', RW, entry)
  end
  local token = s.token or string.format('%d', now_us)
  redis.call('SET', W, lone_read_value({token = token, count = 1, owner = owner, id = op, ops = op}), 'PX', lease)
  return tonumber(token)
end
if s.kind == 'read' then
  s = rw_unfold(s, now_ms) -- another owner's lone read hold
end
local r = load_reader(owner, now_ms)
if r then
  if not seen(r.ops, op) then
    r.count = r.count + 1
  end
  r.ops = remember(r.ops, op, math.floor(now_ms / 1000), acquisition_memory(lease))
  local exp = math.max(r.exp, now_ms + lease)
  store_reader(owner, r, exp, now_ms)
  if registered then
    redis.call('ZREM', RW, entry)
  end
  if s.kind ~= 'write' then
    rw_keep(s, exp - now_ms, now_ms, now_us)
  end
  return {1, r.count, r.token, r.id, exp - now_ms}
end
local blocked, retry = false, -1
if s.kind == 'write' and s.owner ~= owner then
  blocked, retry = true, redis.call('PTTL', W)
elseif s.kind ~= 'write' and ARGV[8] ~= 'r' then
  local h = head(WQ, WX, now_ms)
  if h then
    blocked = true
    purge_readers(now_ms)
    if redis.call('EXISTS', RX) == 0 then
      -- Nothing holds the lock: the head writer, which may be sleeping out
      -- its heartbeat, is due.
      wake(ARGV[7], h)
    end
  end
end
if blocked then
  local token = s.token
  if entry ~= '' then
    register(RW, entry, now_ms, ARGV[5])
  end
  if s.kind == 'write' then
    if entry ~= '' and not s.waiting then
      s.waiting = true
      store(W, s)
    end
  elseif entry ~= '' then
    token = rw_keep(s, ARGV[5], now_ms, now_us)
  elseif s.kind == 'missing' then
    token = rw_settle(s.token, now_ms, now_us)
  end
  return {0, retry, token or '0'}
end
-- A read hold fences nothing: it starts with the last token, and only a
-- lock that lost it draws one.
r = {token = s.token or string.format('%d', now_us), count = 1, id = op, ops = op}
store_reader(owner, r, now_ms + lease, now_ms)
if registered then
  redis.call('ZREM', RW, entry)
end
if s.kind == 'write' then
  -- A downgrade: the write hold's release must see this read hold.
  if not s.waiting then
    s.waiting = true
    store(W, s)
  end
else
  s.token = r.token
  rw_keep(s, lease, now_ms, now_us)
end
return tonumber(r.token)
