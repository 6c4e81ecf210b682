-- The state of a wait group (package waitgroup), prepended to each of its
-- scripts but renew, after the codec. Every script names the same keys, in
-- this order:
--
--   KEYS[1] hash: the phase, from the Add that finds the group empty until
--       its count is 0 again, when every key but KEYS[4] is deleted:
--         n     units pending, abandoned ones aside
--         gen   the phase's generation: the server time in µs when it
--               began, above the last one recorded in KEYS[4]
--         ab    "<owner> <units>": the first owner found to have abandoned
--               units in the phase (its lease ended), if any
--         keep  '1' if the phase keeps abandoned units (Redisson's
--               semantics): nothing is abandoned, and no key expires
--         <owner id>  "<units> <hold id> <ops>": the owner's units, the id
--               of the Add that began its hold, its recent operation ids
--   KEYS[2] holders: sorted set of owner ids by the server time, in ms, at
--       which their lease ends
--   KEYS[3] waiters: sorted set of waiter entries (see codec.lua) by the
--       server time at which they expire, unless their waiter beats again
--   KEYS[4] done: the ends of the last phases that had waiters, newest
--       first, space-separated: "<gen>", or "<gen>:<owner>:<units>" for
--       one with units abandoned; it lives until the last waiter of the
--       last such phase has had its waiter ttl to read it, so that a
--       waiter that missed its wake-up tells a phase that ended from one
--       whose state vanished (deleted, evicted)
--
-- KEYS[1] and KEYS[2] expire no sooner than a grace (the waiter timeout)
-- after the last lease, so that a waiter finds an abandonment before they
-- vanish.

local function wg_keys()
  return {hash = KEYS[1], holders = KEYS[2], waiters = KEYS[3], done = KEYS[4]}
end

-- wg_load returns the phase at k (a table with n, gen, ab and keep), or
-- nil if there is none.
local function wg_load(k)
  local v = redis.call('HMGET', k.hash, 'n', 'gen', 'ab', 'keep')
  if not v[2] then
    if redis.call('EXISTS', k.hash) == 1 then
      error('DSYNC unexpected value at ' .. k.hash .. ': not a wait group')
    end
    return nil
  end
  return {n = tonumber(v[1]) or 0, gen = v[2], ab = v[3] or nil, keep = v[4] == '1'}
end

-- wg_entry returns the entry of owner (a table with owner, units, id and
-- ops), or nil.
local function wg_entry(k, owner)
  local v = redis.call('HGET', k.hash, owner)
  if not v then
    return nil
  end
  local u, id, ops = string.match(v, '^(%d+) (%S+) ?(.*)$')
  if not u then
    error('DSYNC unexpected value at ' .. k.hash .. ' field ' .. owner)
  end
  return {owner = owner, units = tonumber(u), id = id, ops = ops}
end

-- wg_put writes the entry e, or drops it with its lease once it has no
-- unit left.
local function wg_put(k, e)
  if e.units > 0 then
    redis.call('HSET', k.hash, e.owner, string.format('%d', e.units) .. ' ' .. e.id .. ' ' .. e.ops)
  else
    redis.call('HDEL', k.hash, e.owner)
    redis.call('ZREM', k.holders, e.owner)
  end
end

-- wg_purge abandons the units of every owner whose lease ended by now_ms,
-- unless the phase keeps them: they leave the count, the first such owner
-- is recorded, and woke is set, for wg_save to wake the waiters.
local function wg_purge(k, st, now_ms)
  if st.keep then
    return
  end
  for _, o in ipairs(redis.call('ZRANGEBYSCORE', k.holders, '-inf', now_ms)) do
    local e = wg_entry(k, o)
    if e then
      st.n, st.ab, st.woke = st.n - e.units, st.ab or (o .. ' ' .. e.units), true
      redis.call('HDEL', k.hash, o)
    end
    redis.call('ZREM', k.holders, o)
  end
end

-- wg_wake wakes every waiter, with grant unless nil. With out, the wake-ups
-- of the caller's hub (a.hub) are appended to it for the caller to deliver
-- (see hand_to); without, every one is published.
local function wg_wake(k, a, grant, out)
  for _, w in ipairs(redis.call('ZRANGE', k.waiters, 0, -1)) do
    if out then
      local address, g, o = hand_to(a, w, grant or '', '')
      out[#out + 1], out[#out + 2], out[#out + 3] = address, g, o
    else
      wake(a.channel, w, grant)
    end
  end
end

-- wg_save writes the phase st back; at a count of 0 it ends it instead:
-- its end is recorded in the done key if waiters registered, they are
-- woken (with the grant "<gen + 1>" unless units were abandoned, which
-- they learn from their next attempt), and the state is deleted.
local function wg_save(k, st, a, out)
  if st.n > 0 then
    redis.call('HSET', k.hash, 'n', st.n, 'gen', st.gen, 'keep', st.keep and '1' or '0')
    if st.ab then
      redis.call('HSET', k.hash, 'ab', st.ab)
    end
    if st.woke then
      wg_wake(k, a, nil, out)
    end
    return
  end
  if redis.call('EXISTS', k.waiters) == 1 then
    local list = {st.gen .. (st.ab and (':' .. string.gsub(st.ab, ' ', ':')) or '')}
    for m in string.gmatch(redis.call('GET', k.done) or '', '%S+') do
      if #list < 8 then
        list[#list + 1] = m
      end
    end
    redis.call('SET', k.done, table.concat(list, ' '), 'PX', math.max(redis.call('PTTL', k.waiters), 0) + tonumber(a.entry_ttl))
    wg_wake(k, a, not st.ab and string.format('%d', tonumber(st.gen) + 1) or nil, out)
  end
  redis.call('DEL', k.hash, k.holders, k.waiters)
end

-- wg_expire makes the phase's hash and holders expire no sooner than ttl
-- ms from now, or never in a phase that keeps abandoned units.
local function wg_expire(k, st, ttl)
  if st.keep then
    redis.call('PERSIST', k.hash)
    redis.call('PERSIST', k.holders)
  else
    expire_at_least(k.hash, ttl)
    expire_at_least(k.holders, ttl)
  end
end
