-- renew_read: extend many read holds in one call (the lease scheduler's
-- batch).
-- KEYS: per hold, its readers hash and its read expiry set (see rw.lua).
-- ARGV[1] keys per hold (2); ARGV[2] args per hold; then per hold its
-- owner id, lease ms (0: only check the hold, as for a fixed lease) and
-- hold id.
-- Reply: per hold 1 if that very hold is still live and now expires no
-- sooner than its lease from now, else 0. Keys of the wrong type cost only
-- their own hold.
local out, nkeys, per = {}, tonumber(ARGV[1]), tonumber(ARGV[2])
local now_ms = now()
for i = 1, #KEYS / nkeys do
  local readers, rexpiry = KEYS[(i - 1) * nkeys + 1], KEYS[(i - 1) * nkeys + 2]
  local base = 2 + (i - 1) * per
  local owner, lease, id = ARGV[base + 1], tonumber(ARGV[base + 2]), ARGV[base + 3]
  local exp = redis.pcall('ZSCORE', rexpiry, owner)
  local v = redis.pcall('HGET', readers, owner)
  out[i] = 0
  if type(exp) == 'string' and type(v) == 'string' and tonumber(exp) > now_ms and string.match(v, '^%d+ %d+ (%S+)') == id then
    if now_ms + lease > tonumber(exp) then
      redis.call('ZADD', rexpiry, now_ms + lease, owner)
    end
    expire_at_least(readers, lease)
    expire_at_least(rexpiry, lease)
    out[i] = 1
  end
end
return out
