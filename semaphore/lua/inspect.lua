-- inspect: read the semaphore's state, without writing.
-- KEYS: see state.lua (state, holders, queue, expiry, capacity).
-- ARGV[1] the handle's capacity; ARGV[2] the owner id whose permits and
-- queue position to report ('' for none).
-- Reply: {capacity in force, permits held (leases that ended left out),
-- live holders, that owner's permits, live waiters queued, that owner's
-- position in the queue (1 at the head, 0 if not queued), 1 if the
-- capacity was set at runtime, the state's capacity (0 if no state),
-- that owner's hold id ('' if none)}.
local k = sem_keys()
local owner = ARGV[2]
local v = redis.pcall('GET', k.hash)
local s = type(v) == 'string' and sem_single(v)
-- Without a state, the leases holders may still list are of permits lost
-- with it (see sem_purge): none is live.
local st = not s and (v and sem_open(k, v, nil) or sem_load(k))
local override = sem_override(k)
local now_ms = now()
local out
if s then
  local limit = override or s.cap or tonumber(ARGV[1])
  if s.held then
    out = {limit, s.permits, 1, 0, 0, 0, override and 1 or 0, s.cap or 0, ''}
    if owner == s.owner then
      out[4], out[9] = s.permits, s.id
    end
  else
    out = {limit, 0, 0, 0, 0, 0, override and 1 or 0, 0, ''}
  end
else
  st.override = override
  local used = st.used
  for _, o in ipairs(redis.call('ZRANGEBYSCORE', k.holders, '-inf', now_ms)) do
    local h = sem_holder(k, o)
    if h then
      used = used - h.permits
    end
  end
  local live = v and redis.call('ZCOUNT', k.holders, '(' .. now_ms, '+inf') or 0
  if live == 0 then
    used = 0 -- the holders key vanished: the permits counted are lost (see sem_purge)
  end
  out = {sem_limit(st, ARGV[1]), used, live, 0, 0, 0, override and 1 or 0, st.cap or 0, ''}
  if owner ~= '' then
    local h = sem_holder(k, owner)
    if h and sem_left(k, owner, now_ms) > 0 then
      out[4], out[9] = h.permits, h.id
    end
  end
end
out[5] = redis.call('ZCOUNT', k.expiry, '(' .. now_ms, '+inf')
if owner ~= '' and out[5] > 0 then
  local pos = 0
  for _, w in ipairs(redis.call('ZRANGE', k.queue, 0, -1)) do
    local exp = redis.call('ZSCORE', k.expiry, w)
    if exp and tonumber(exp) > now_ms then
      pos = pos + 1
      if entry_owner(w) == owner then
        out[6] = pos
        break
      end
    end
  end
end
return out
