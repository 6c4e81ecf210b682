-- renew: extend many terms in one call (the lease scheduler's batch).
-- KEYS: per term, the election's main key and leader state.
-- ARGV[1] keys per term (2); ARGV[2] args per term (3); then per term its
-- owner id, lease ms (0: only check the term, as for a fixed lease) and
-- hold id.
-- Reply: per term 1 if that very term (owner and hold id) is still on and
-- now ends no sooner than its lease from now, else 0. A key that is not
-- an election's costs only its own term.
local nk, per = tonumber(ARGV[1]), tonumber(ARGV[2])
local out = {}
for i = 1, #KEYS / nk do
  local lock, leader = KEYS[(i - 1) * nk + 1], KEYS[(i - 1) * nk + 2]
  local base = 2 + (i - 1) * per
  local s = load(lock)
  out[i] = 0
  if s.owner == ARGV[base + 1] and s.id == ARGV[base + 3] then
    -- A plain term is converted before its expiry moves: until then, the
    -- expiry tells when it began (see convert). A leader state that dsync
    -- did not write leaves it plain, reads fail on it, and it is left
    -- alone.
    local foreign = convert(lock, leader, s)
    extend(lock, s, ARGV[base + 2])
    if not foreign then
      expire_at_least(leader, ARGV[base + 2])
    end
    out[i] = 1
  end
end
return out
