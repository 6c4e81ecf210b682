-- read_acquire: take or re-enter a read hold.
-- KEYS: see rw.lua.
-- ARGV[1] owner id; ARGV[2] operation id, the same on every retry of one
-- acquisition, so that a retry after a lost reply does not count twice;
-- ARGV[3] lease ms; ARGV[4] waiter entry (see hand_off in exclusive.lua),
-- '' not to register on failure; ARGV[5] waiter timeout ms; ARGV[6] '1' if
-- an earlier attempt registered the waiter; ARGV[7] fence ttl ms; ARGV[8]
-- wake channel base; ARGV[9] 'r' if readers are preferred, else 'w'.
-- Reply: {1, the owner's read hold count, token, hold id, remaining ms of
-- the hold} when held; {0, remaining ms of the write hold that blocks it
-- (-1 if unknown), the last token ('0' if none)} otherwise.
--
-- A read hold is granted to an owner that has one (a re-entry) or holds
-- the write lock (a downgrade), else only while no write hold is held
-- and, unless readers are preferred, no live writer waits.
local owner, op, lease, entry = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local now_ms, now_us = now()
local s = load(W)
if s.foreign then
  return unexpected(W, s.foreign)
end
local r = load_reader(owner, now_ms)
if r then
  if not seen(r.ops, op) then
    r.count = r.count + 1
  end
  r.ops = remember(r.ops, op, math.floor(now_ms / 1000), acquisition_memory(lease))
  local exp = math.max(r.exp, now_ms + lease)
  store_reader(owner, r, exp, now_ms)
  if ARGV[6] == '1' then
    redis.call('ZREM', RW, entry)
  end
  return {1, r.count, r.token, r.id, exp - now_ms}
end
local blocked, retry = false, -1
if s.owner and s.owner ~= owner then
  blocked, retry = true, redis.call('PTTL', W)
elseif not s.owner and ARGV[9] ~= 'r' then
  local h = head(WQ, WX, now_ms)
  if h then
    blocked = true
    purge_readers(now_ms)
    if redis.call('EXISTS', RX) == 0 then
      -- Nothing holds the lock: the head writer, which may be sleeping out
      -- its heartbeat, is due.
      wake(ARGV[8], h)
    end
  end
end
if blocked then
  if entry ~= '' then
    register(RW, entry, now_ms, ARGV[5])
  end
  return {0, retry, current_token(s.token)}
end
-- A read hold fences nothing: it starts with the last token, and only a
-- lock that never had one draws one, as every hold needs a token.
r = {token = current_token(s.token), count = 1, id = op, ops = op}
if r.token == '0' then
  r.token = rw_next_token(s.token, now_us)
  record_token(FENCE, r.token, ARGV[7])
  if not s.owner then
    note_free_token(r.token, ARGV[7])
  end
end
store_reader(owner, r, now_ms + lease, now_ms)
if ARGV[6] == '1' then
  redis.call('ZREM', RW, entry)
end
return {1, 1, r.token, op, lease}
