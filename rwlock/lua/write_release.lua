-- write_release: undo one write hold of the owner; the last one passes
-- the lock on (see pass_on).
-- KEYS: see rw.lua.
-- ARGV[1] owner id; ARGV[2] operation id, the same on every retry of one
-- release; ARGV[3] lease ms restored on a partial release ('0' for a fixed
-- lease); ARGV[4] wake channel base; ARGV[5] fence ttl ms; ARGV[6] the
-- caller's process id; ARGV[7] the ids of the holds it may release,
-- space-separated; ARGV[8] 'r' if readers are preferred, else 'w'.
-- Reply: {the owner's remaining write hold count, or -1 if it holds none
-- of those; the id of the hold ('' if none)}, followed by the address,
-- token and owner id of each waiter the lock was handed to.
local owner, op = ARGV[1], ARGV[2]
local s = load(W)
if s.foreign then
  return unexpected(W, s.foreign)
end
if s.owner ~= owner or not listed(ARGV[7], s.id) then
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
free(W, s, ARGV[5])
local out = {0, s.id}
pass_on(out, true, {channel = ARGV[4], fence_ttl = ARGV[5], process = ARGV[6], prefer = ARGV[8], last = s.token})
return out
