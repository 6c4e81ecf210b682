-- add: n more units pending for an owner, under its lease. The Add that
-- finds the group empty (or its units all abandoned, which ends that
-- phase first) begins a phase.
-- KEYS: see state.lua (hash, holders, waiters, done).
-- ARGV: the header (see codec.lua), of which the owner, the operation id,
-- the lease, the channel and the entry ttl count; ARGV[12] n; ARGV[13]
-- '1' if a phase that begins keeps abandoned units; ARGV[14] the grace
-- ms (see state.lua).
-- Reply: an attempt's (see codec.lua): {1, the owner's units, the phase's
-- generation, the owner's hold id, ms its lease has left}; the error
-- "DSYNC too many units", the units not added, if the count would pass
-- 2^53 - 1 (MaxUnits), past which Lua's numbers are not exact.
local a = header()
local now_ms, now_us = now()
local st = wg_load(now_ms)
if not st or st.n <= 0 then
  local last = string.match(redis.call('GET', done) or '', '^%d+') or 0
  st = {n = 0, gen = string.format('%d', math.max(now_us, last + 1)), keep = ARGV[13] == '1'}
end
local e = wg_entry(a.owner) or {owner = a.owner, units = 0, id = a.op, ops = ''}
if not seen(e.ops, a.op) then
  if st.n + ARGV[12] > 9007199254740991 then return redis.error_reply('DSYNC too many units') end
  e.units, st.n = e.units + ARGV[12], st.n + ARGV[12]
end
e.ops = remember(e.ops, a.op, math.floor(now_ms / 1000), acquisition_memory(a.lease))
wg_save(st, a, e)
redis.call('ZADD', holders, 'GT', now_ms + a.lease, a.owner)
if not st.keep then
  expire_at_least(hash, a.lease + ARGV[14])
  expire_at_least(holders, a.lease + ARGV[14])
end
return {1, e.units, st.gen, e.id, redis.call('ZSCORE', holders, a.owner) - now_ms}
