-- read_release: undo one read hold of the owner; the last read hold of
-- the lock passes it on (see pass_on).
-- KEYS: see rw.lua.
-- ARGV[1] owner id; ARGV[2] operation id, the same on every retry of one
-- release; ARGV[3] lease ms restored on a partial release ('0' for a fixed
-- lease); ARGV[4] wake channel base; ARGV[5] fence ttl ms; ARGV[6] the
-- caller's process id; ARGV[7] the ids of the holds it may release,
-- space-separated; ARGV[8] 'r' if readers are preferred, else 'w'.
-- Reply: {the owner's remaining read hold count, or -1 if it holds none of
-- those; the id of the hold ('' if none)}, followed by the address, token
-- and owner id of each waiter the lock was handed to.
local owner, op = ARGV[1], ARGV[2]
local now_ms = now()
local r = load_reader(owner, now_ms)
if not r or not listed(ARGV[7], r.id) then
  return {-1, ''}
end
if seen(r.ops, op) then
  return {r.count, r.id}
end
if r.count > 1 then
  r.count = r.count - 1
  r.ops = remember(r.ops, op, math.floor(now_ms / 1000), op_memory)
  store_reader(owner, r, math.max(r.exp, now_ms + tonumber(ARGV[3])), now_ms)
  return {r.count, r.id}
end
drop_reader(owner)
local out = {0, r.id}
if redis.call('ZCOUNT', RX, '(' .. now_ms, '+inf') > 0 then
  return out -- other readers hold it: a waiting writer waits for them
end
local s = load(W)
if not s.owner and not s.foreign then
  pass_on(out, false, {channel = ARGV[4], fence_ttl = ARGV[5], process = ARGV[6], prefer = ARGV[8], last = s.token})
end
return out
