-- force: free the lock of every hold, write and read, whoever holds them,
-- and pass it on (see pass_on).
-- KEYS: see rw.lua.
-- ARGV: the header (see codec.lua), of which the channel and the hub id
-- count; ARGV[12] unused (a token to match: the read-write lock has no
-- ForceUnlockToken); ARGV[13] 'r' if readers are preferred, else 'w'.
-- Reply: {holds taken; their hold ids, space-separated}, followed by each
-- waiter the lock was handed to (see hand_to).
local s = rw_load(redis.pcall('GET', W))
if s.foreign then
  return unexpected(W, s.foreign)
end
local now_ms, now_us = now()
purge_readers(now_ms)
local ids = {}
if s.kind == 'write' or s.kind == 'read' then
  ids[#ids + 1] = s.id
  s.token = rw_vacate(s.token)
end
-- A reader counts only with its expiry entry: one left without it (the
-- rexpiry key vanished) was lost, and its holder told at its renewal.
local rs = redis.call('HGETALL', R)
for i = 1, #rs, 2 do
  local id = string.match(rs[i + 1], '^%d+ %d+ (%S+)')
  if id and redis.call('ZSCORE', RX, rs[i]) then
    ids[#ids + 1] = id
  end
end
redis.call('DEL', R, RX)
local out = {#ids, table.concat(ids, ' ')}
if #ids > 0 then
  local a = rw_header()
  a.prefer, a.last = ARGV[13], s.token
  pass_and_settle(out, true, a, now_ms, now_us)
end
return out
