-- write_acquire: take or re-enter the write hold, in the writers' turn.
-- KEYS: see rw.lua.
-- ARGV[1] owner id; ARGV[2] operation id, the same on every retry of one
-- acquisition; ARGV[3] lease ms; ARGV[4] waiter entry, '' not to queue on
-- failure; ARGV[5] waiter timeout ms; ARGV[6] '1' if an earlier attempt
-- queued the waiter; ARGV[7] fence ttl ms; ARGV[8] wake channel base.
-- Reply: {1, the owner's write hold count, token, hold id, remaining ms
-- of the hold} when held; {0, ms until the hold that blocks it may end
-- (-1 if unknown), the last token ('0' if none)} otherwise; the error
-- 'DSYNC upgrade' if the owner holds only a read hold.
--
-- The write hold is taken by its owner re-entering, or when neither a
-- write nor a read hold is held, by the head of the writers' queue, or by
-- anyone if no live writer is queued.
local owner, op, lease, entry = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local now_ms, now_us = now()
local s = load(W)
if s.foreign then
  return unexpected(W, s.foreign)
end
if s.owner == owner then
  if not seen(s.ops, op) then
    s.count = s.count + 1
  end
  s.ops = remember(s.ops, op, math.floor(now_ms / 1000), acquisition_memory(lease))
  store_extending(W, s, lease)
  if ARGV[6] == '1' then
    dequeue(WQ, WX, entry)
  end
  return {1, s.count, s.token, s.id, redis.call('PTTL', W)}
end
if load_reader(owner, now_ms) then
  return redis.error_reply('DSYNC upgrade: the owner holds a read hold of ' .. W)
end
purge_readers(now_ms)
local readers = redis.call('EXISTS', RX) == 1
local h = false
if not s.owner and not readers then
  h = head(WQ, WX, now_ms)
  if not h or h == entry then
    local token = rw_next_token(s.token, now_us)
    if h then
      dequeue(WQ, WX, h)
    end
    s = {token = token, count = 1, waiting = true, owner = owner, id = op, ops = op}
    grant(W, FENCE, s, lease, ARGV[7])
    return {1, 1, token, op, tonumber(lease)}
  end
end
if entry ~= '' then
  enqueue(WQ, WX, entry, now_ms, ARGV[5])
end
if s.owner then
  return {0, redis.call('PTTL', W), current_token(s.token)}
end
if readers then
  return {0, first_read_expiry(now_ms), current_token(s.token)}
end
wake(ARGV[8], h)
return {0, -1, current_token(s.token)}
