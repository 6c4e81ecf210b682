-- renew: extend many holds in one call (the lease scheduler's batch).
-- KEYS: one lock key (see load) per hold.
-- ARGV[1] keys per hold (1); ARGV[2] args per hold (2); then per hold:
-- owner id, lease ms.
-- Reply: per hold, 1 if still held by that owner and extended, else 0.
local out = {}
for i = 1, #KEYS do
  local base = 2 + (i - 1) * 2
  if load(KEYS[i]).owner == ARGV[base + 1] then
    redis.call('PEXPIRE', KEYS[i], ARGV[base + 2])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
