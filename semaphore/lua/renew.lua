-- renew: extend many holders' leases in one call (the lease scheduler's
-- batch).
-- KEYS: per hold, its semaphore's state and holders (see state.lua).
-- ARGV[1] keys per hold (2); ARGV[2] args per hold (3); then per hold its
-- owner id, lease ms (0: only check the hold, as for a fixed lease) and
-- hold id.
-- Reply: per hold 1 if that very hold (owner and hold id) is still there,
-- its lease not ended, and now ends no sooner than its lease from now;
-- else 0. A key that is not a semaphore's costs only its own hold.
local nk, per = tonumber(ARGV[1]), tonumber(ARGV[2])
local now_ms
local out = {}
for i = 1, #KEYS / nk do
  local hash, holders = KEYS[(i - 1) * nk + 1], KEYS[(i - 1) * nk + 2]
  local base = 2 + (i - 1) * per
  local owner, lease, id = ARGV[base + 1], tonumber(ARGV[base + 2]), ARGV[base + 3]
  out[i] = 0
  local v = redis.pcall('GET', hash)
  if type(v) == 'string' then
    -- The single form: the key expires with the hold.
    local s = sem_single(v)
    if s and s.held and s.owner == owner and s.id == id then
      expire_at_least(hash, lease)
      out[i] = 1
    end
  elseif type(v) == 'table' then
    local ok, h = pcall(sem_holder, {hash = hash}, owner)
    if ok and h and h.id == id then
      now_ms = now_ms or now()
      local d = redis.pcall('ZSCORE', holders, owner)
      if type(d) == 'string' and tonumber(d) > now_ms then
        if tonumber(d) < now_ms + lease then
          redis.call('ZADD', holders, now_ms + lease, owner)
        end
        sem_expire({hash = hash, holders = holders}, lease)
        out[i] = 1
      end
    end
  end
end
return out
