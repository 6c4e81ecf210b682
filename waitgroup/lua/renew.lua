-- renew: extend many owners' leases in one call (the lease scheduler's
-- batch).
-- KEYS: per owner, its wait group's hash and holders (see state.lua).
-- ARGV[1] keys per owner (2); ARGV[2] args per owner (4); then per owner
-- its id, its lease ms (0: only check), its hold id and the grace ms.
-- Reply: per owner 1 if that hold's units are still pending, its lease
-- not ended (or its record gone with the holders key, evicted, say, which
-- this renewal writes again), and now ends no sooner than its lease from
-- now; else 0 (in a phase that keeps abandoned units, units whose lease
-- ended stay pending, lost to their owner). A key that is not a wait
-- group's costs only its own owner.
local nk, per = tonumber(ARGV[1]), tonumber(ARGV[2])
local now_ms, out = now(), {}
for i = 1, #KEYS / nk do
  local hash, holders = KEYS[(i - 1) * nk + 1], KEYS[(i - 1) * nk + 2]
  local b = 2 + (i - 1) * per
  local owner, lease, id = ARGV[b + 1], tonumber(ARGV[b + 2]), ARGV[b + 3]
  local v, d = redis.pcall('HGET', hash, owner), redis.pcall('ZSCORE', holders, owner)
  local ok = type(v) == 'string' and string.match(v, '^%d+ (%S+)') == id and (d == false or type(d) == 'string' and tonumber(d) > now_ms)
  if ok and lease > 0 then
    redis.call('ZADD', holders, 'GT', now_ms + lease, owner)
    if redis.call('PTTL', hash) > 0 then
      expire_at_least(hash, lease + ARGV[b + 4])
      expire_at_least(holders, lease + ARGV[b + 4])
    end
  end
  out[i] = ok and 1 or 0
end
return out
