-- add: n more units pending for an owner, under its lease. The Add that
-- finds the group empty (or its units all abandoned, which ends that
-- phase first) begins a phase.
-- KEYS: see state.lua (hash, holders, waiters, done).
-- ARGV: the header (see codec.lua), of which the owner, the operation id,
-- the lease, the channel and the entry ttl count; ARGV[12] n; ARGV[13]
-- '1' if a phase that begins keeps abandoned units; ARGV[14] the grace
-- ms (see state.lua).
-- Reply: an attempt's (see codec.lua): {1, the owner's units, the phase's
-- generation, the owner's hold id, ms its lease has left}.
local a = header()
local k = wg_keys()
local n = tonumber(ARGV[12])
local now_ms, now_us = now()
local st = wg_load(k)
if st then
  wg_purge(k, st, now_ms)
  if st.n <= 0 then
    wg_save(k, st, a)
    st = nil
  end
end
if not st then
  local last = tonumber(string.match(redis.call('GET', k.done) or '', '^%d+') or 0)
  st = {n = 0, gen = string.format('%d', math.max(now_us, last + 1)), keep = ARGV[13] == '1'}
end
local e = wg_entry(k, a.owner) or {owner = a.owner, units = 0, id = a.op, ops = ''}
if not seen(e.ops, a.op) then
  e.units, st.n = e.units + n, st.n + n
end
e.ops = remember(e.ops, a.op, math.floor(now_ms / 1000), acquisition_memory(a.lease))
wg_put(k, e)
local till = math.max(now_ms + tonumber(a.lease), tonumber(redis.call('ZSCORE', k.holders, a.owner) or 0))
redis.call('ZADD', k.holders, till, a.owner)
wg_save(k, st, a)
wg_expire(k, st, tonumber(a.lease) + tonumber(ARGV[14]))
return {1, e.units, st.gen, e.id, till - now_ms}
