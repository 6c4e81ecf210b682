-- write_acquire: take or re-enter the write hold, in the writers' turn.
-- KEYS: see rw.lua.
-- ARGV[1] owner id; ARGV[2] operation id, the same on every retry of one
-- acquisition; ARGV[3] lease ms; ARGV[4] waiter entry, '' not to queue on
-- failure; ARGV[5] waiter timeout ms; ARGV[6] '1' if an earlier attempt
-- queued the waiter; ARGV[7] wake channel base.
-- Reply: the token of a new write hold that the operation took for the
-- lease asked; {1, the owner's write hold count, token, hold id,
-- remaining ms of the hold} when held otherwise; {0, ms until the hold
-- that blocks it may end (-1 if unknown), the last token ('0' if none)}
-- when not; the error 'DSYNC upgrade' if the owner holds only a read
-- hold.
--
-- The write hold is taken by its owner re-entering, or when neither a
-- write nor a read hold is held, by the head of the writers' queue, or by
-- anyone if no live writer is queued.
local owner, op, lease, entry, registered = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[6] == '1'
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'string' and not registered then
  -- The common case, a lock freed by a lone holder: one read, one write.
  local last = string.match(v, '^(%d+) free$')
  if last then
    local token = tonumber(last) + 1
    redis.call('SET', KEYS[1], string.format('%d 1 0 %s %s %s', token, owner, op, op), 'PX', lease)
    return token
  end
end
-- (library parts: see newScript)
local s = rw_decode(v)
if s.foreign then
  return unexpected(W, s.foreign)
end
local now_ms, now_us = now()
if s.kind == 'write' and s.owner == owner then
  if not seen(s.ops, op) then
    s.count = s.count + 1
  end
  s.ops = remember(s.ops, op, math.floor(now_ms / 1000), acquisition_memory(lease))
  store_extending(W, s, lease)
  if registered then
    dequeue(WQ, WX, entry)
  end
  return {1, s.count, s.token, s.id, redis.call('PTTL', W)}
end
if (s.kind == 'read' and s.owner == owner) or ((s.kind == 'shared' or s.kind == 'missing') and load_reader(owner, now_ms)) then
  return redis.error_reply('DSYNC upgrade: the owner holds a read hold of ' .. W)
end
if s.kind == 'free' then
  -- Nothing else is there (see rw.lua): a waiter's own stale entry at
  -- most.
  if registered then
    dequeue(WQ, WX, entry)
  end
  local token = tonumber(s.token) + 1
  store(W, {token = string.format('%d', token), count = 1, waiting = false, owner = owner, id = op, ops = op}, lease)
  return token
end
if s.kind == 'write' or s.kind == 'read' then
  -- Another owner's write hold, or lone read hold.
  local left = redis.call('PTTL', W)
  if entry ~= '' then
    if s.kind == 'read' then
      rw_unfold(s, now_ms)
      enqueue(WQ, WX, entry, now_ms, ARGV[5])
      rw_settle(s.token, now_ms, now_us)
    else
      enqueue(WQ, WX, entry, now_ms, ARGV[5])
      if not s.waiting then
        s.waiting = true
        store(W, s)
      end
    end
  end
  return {0, left, s.token}
end
-- Shared, or missing: no write hold.
purge_readers(now_ms)
local readers = redis.call('EXISTS', RX) == 1
local h = false
if not readers then
  h = head(WQ, WX, now_ms)
  if not h or h == entry then
    if h then
      dequeue(WQ, WX, h)
    end
    local token = next_token(s.token, nil, now_us)
    store(W, {token = token, count = 1, waiting = true, owner = owner, id = op, ops = op}, lease)
    return tonumber(token)
  end
end
local token = s.token or '0'
if entry ~= '' then
  enqueue(WQ, WX, entry, now_ms, ARGV[5])
  token = rw_keep(s, ARGV[5], now_ms, now_us)
elseif s.kind == 'missing' then
  token = rw_settle(s.token, now_ms, now_us)
end
if readers then
  return {0, first_read_expiry(now_ms), token}
end
-- Nothing holds the lock: the head writer, which may be sleeping out its
-- heartbeat, is due.
wake(ARGV[7], h)
return {0, -1, token}
