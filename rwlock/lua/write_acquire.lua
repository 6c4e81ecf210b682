-- write_acquire: take or re-enter the write hold, in the writers' turn.
-- KEYS: see rw.lua.
-- ARGV: the header (see codec.lua); ARGV[12] 'r' if readers are preferred,
-- else 'w'.
-- Reply: an attempt's (see codec.lua); the error 'DSYNC upgrade' if the
-- owner holds only a read hold, unless the writer is queued already.
--
-- The write hold is taken by its owner re-entering, or when neither a
-- write nor a read hold is held, by the head of the writers' queue, or by
-- anyone if no live writer is queued.
-- W exists whenever anything else is on the lock (see rw.lua): where it is
-- missing, a plain SET NX, the client's or this script's, takes the lock
-- in turn.
if ARGV[10] == '0' and redis.call('SET', KEYS[1], ARGV[4], 'NX', 'PX', ARGV[5]) then
  -- The common case: nothing is on the lock, and a plain SET takes it.
  return 0
end
-- dsync:library
local a = rw_header()
local owner, op, lease, entry, registered = a.owner, a.op, a.lease, a.entry, a.registered
local v = redis.pcall('GET', W)
local s = rw_load(v)
if s.foreign then
  return unexpected(W, s.foreign)
end
local now_ms, now_us = now()
s = readers_due(a, s, now_ms, now_us)
if s.kind == 'write' and s.owner == owner then
  enter(W, s, a)
  if registered then
    dequeue(WQ, WX, entry)
  end
  return acquired(W, s)
end
if ((s.kind == 'read' and s.owner == owner) or ((s.kind == 'shared' or s.kind == 'missing') and load_reader(owner, now_ms)))
  and not (registered and redis.call('ZSCORE', WQ, entry)) then
  -- A writer still queued was refused nothing when it queued: its owner
  -- held no read hold then, and one that another of its goroutines got
  -- since (handed to it as a reader that waited out a write, say) is
  -- waited for as any other.
  return redis.error_reply('DSYNC upgrade: the owner holds a read hold of ' .. W)
end
if s.kind == 'write' or s.kind == 'read' then
  -- Another owner's write hold, or a lone read hold (its owner's too,
  -- for a writer queued before it, see above).
  local left = s.kind == 'write' and hold_left(W, s) or redis.call('PTTL', W)
  if entry ~= '' then
    if s.kind == 'read' then
      rw_unfold(s, now_ms)
      enqueue(WQ, WX, entry, now_ms, a.entry_ttl, not registered)
      rw_settle(s.token, now_ms, now_us)
    else
      enqueue(WQ, WX, entry, now_ms, a.entry_ttl, not registered)
      rw_keep(s, a.entry_ttl, now_ms, now_us)
    end
  end
  return not_acquired(left, s.token)
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
    return tonumber(take(W, s, a, true, now_us).token)
  end
end
local token = s.token or '0'
if entry ~= '' then
  enqueue(WQ, WX, entry, now_ms, a.entry_ttl, not registered)
  token = rw_keep(s, a.entry_ttl, now_ms, now_us)
elseif s.kind == 'missing' then
  token = rw_settle(s.token, now_ms, now_us)
end
if readers then
  return not_acquired(first_read_expiry(now_ms), token)
end
-- Nothing holds the lock: the head writer, which may be sleeping out its
-- heartbeat, is due.
wake(a.channel, h)
return not_acquired(-1, token)
