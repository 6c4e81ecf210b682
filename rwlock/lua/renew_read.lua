-- renew_read: extend many read holds in one call (the lease scheduler's
-- batch).
-- KEYS: per hold, its lock's W, readers hash and read expiry set (see
-- rw.lua, whose functions are given W of the first hold: rw_decode only).
-- ARGV[1] keys per hold (3); ARGV[2] args per hold; then per hold its
-- owner id, lease ms (0: only check the hold, as for a fixed lease) and
-- hold id.
-- Reply: per hold 1 if that very hold is still live and now expires no
-- sooner than its lease from now, else 0. Keys of the wrong type cost only
-- their own hold.
--
-- W outlives every read hold (see rw.lua): each renewal extends it too,
-- to turn_margin past the hold (see rw_outlive), the key only where it is
-- the owner's write hold (a downgrade), whose own end stays. A read hold
-- beside another owner's write hold, or with W missing altogether, is
-- lost: W was deleted or evicted behind dsync's back, and a plain writer
-- took it, or may have taken it and gone (see rw_load in rw.lua); the hold
-- is dropped, and its holder told at once.
local out, nkeys, per = {}, tonumber(ARGV[1]), tonumber(ARGV[2])
local now_ms
for i = 1, #KEYS / nkeys do
  local w, readers, rexpiry = KEYS[(i - 1) * nkeys + 1], KEYS[(i - 1) * nkeys + 2], KEYS[(i - 1) * nkeys + 3]
  local base = 2 + (i - 1) * per
  local owner, lease, id = ARGV[base + 1], tonumber(ARGV[base + 2]), ARGV[base + 3]
  out[i] = 0
  local v = redis.pcall('GET', w)
  local s = rw_decode(v)
  local lone, lone_id
  if s.kind == 'read' then
    lone, lone_id = s.owner, s.id
  end
  if lone then
    -- A lone read hold is W itself (see rw.lua).
    if lone == owner and lone_id == id then
      expire_at_least(w, lease)
      out[i] = 1
    end
  else
    now_ms = now_ms or now()
    local exp = redis.pcall('ZSCORE', rexpiry, owner)
    local h = redis.pcall('HGET', readers, owner)
    local live = type(exp) == 'string' and type(h) == 'string' and tonumber(exp) > now_ms and
      string.match(h, '^%d+ %d+ (%S+)') == id
    if live and (s.kind == 'write' and s.owner ~= owner or s.kind == 'missing' and not s.token) then
      redis.call('HDEL', readers, owner)
      redis.call('ZREM', rexpiry, owner)
    elseif live then
      if now_ms + lease > tonumber(exp) then
        redis.call('ZADD', rexpiry, now_ms + lease, owner)
      end
      expire_at_least(readers, lease)
      expire_at_least(rexpiry, lease)
      if s.kind == 'shared' then
        -- W outlives every read hold.
        rw_outlive(w, lease)
      elseif s.kind == 'write' and s.token and lease > 0 then
        -- The owner's write hold: its key, not the hold, outlives this
        -- read hold.
        keep_turn(w, s, lease, now_ms)
      elseif s.ended then
        -- The owner's write hold has ended (its end form, see rw.lua),
        -- and W stays so, outliving this read hold: the first script
        -- that passes the lock on must find the write hold ended, and
        -- hand it to the readers that waited it out (see readers_due),
        -- which a renewal, without their keys, cannot.
        rw_outlive(w, lease)
      elseif s.kind == 'missing' and s.token then
        -- W says the read holds are in the other keys.
        redis.call('SET', w, s.token .. ' shared', 'KEEPTTL')
        rw_outlive(w, lease)
      end
      out[i] = 1
    end
  end
end
return out
