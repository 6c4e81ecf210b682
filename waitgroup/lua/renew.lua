-- renew: extend many owners' leases in one call (the lease scheduler's
-- batch).
-- KEYS: per owner, its wait group's hash and holders (see state.lua).
-- ARGV[1] keys per owner (2); ARGV[2] args per owner (4); then per owner
-- its id, its lease ms (0: only check), its hold id and the grace ms.
-- Reply: per owner 1 if that hold's units are still pending, its lease
-- not ended (or the phase keeps abandoned units), and now ends no sooner
-- than its lease from now; else 0. A key that is not a wait group's costs
-- only its own owner.
local nk, per = tonumber(ARGV[1]), tonumber(ARGV[2])
local now_ms
local out = {}
for i = 1, #KEYS / nk do
  local hash, holders = KEYS[(i - 1) * nk + 1], KEYS[(i - 1) * nk + 2]
  local b = 2 + (i - 1) * per
  local owner, lease, id, grace = ARGV[b + 1], tonumber(ARGV[b + 2]), ARGV[b + 3], tonumber(ARGV[b + 4])
  out[i] = 0
  local v = redis.pcall('HMGET', hash, owner, 'keep')
  local d = redis.pcall('ZSCORE', holders, owner)
  if type(v) == 'table' and v[1] and string.match(v[1], '^%d+ (%S+)') == id and type(d) == 'string' then
    now_ms = now_ms or now()
    if tonumber(d) > now_ms or v[2] == '1' then
      if lease > 0 and tonumber(d) < now_ms + lease then
        redis.call('ZADD', holders, now_ms + lease, owner)
      end
      if lease > 0 and v[2] ~= '1' then
        expire_at_least(hash, lease + grace)
        expire_at_least(holders, lease + grace)
      end
      out[i] = 1
    end
  end
end
return out
