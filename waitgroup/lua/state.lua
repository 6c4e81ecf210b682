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
--               units in the phase (its lease ended), or ''
--         keep  '1' if the phase keeps abandoned units (Redisson's
--               semantics): nothing is abandoned, and no key expires
--         <owner id>  "<units> <hold id> <ops>": the owner's units, the id
--               of the Add that began its hold, its recent operation ids
--   KEYS[2] holders: sorted set of owner ids by the server time, in ms, at
--       which their lease ends
--   KEYS[3] waiters: sorted set of waiter entries (see codec.lua) by the
--       server time at which they expire, unless their waiter beats again
--   KEYS[4] done: the ends of the last 64 phases that had waiters, newest
--       first, space-separated: "<gen>", or "<gen>:<owner>:<units>" for
--       one with units abandoned; it outlives the last waiter of the last
--       such phase by a waiter ttl, so that a waiter that missed its
--       wake-up tells a phase that ended from one whose state vanished
--       (deleted, evicted)
--
-- KEYS[1] and KEYS[2] expire no sooner than a grace (the waiter timeout)
-- after the last lease, so that a waiter finds an abandonment before they
-- vanish; never in a phase that keeps abandoned units.

local hash, holders, waiters, done = KEYS[1], KEYS[2], KEYS[3], KEYS[4]

-- wg_decode returns owner's entry from v, its value in the hash (a table
-- with owner, units, id and ops), or nil if v is not one (missing, or not
-- written by dsync).
local function wg_decode(owner, v)
  local u, id, ops = string.match(type(v) == 'string' and v or '', '^(%d+) (%S+) ?(.*)$')
  return u and {owner = owner, units = tonumber(u), id = id, ops = ops} or nil
end

-- wg_entry returns the entry of owner (see wg_decode).
local function wg_entry(owner)
  return wg_decode(owner, redis.call('HGET', hash, owner))
end

-- wg_ended returns the generation and the abandonment ("<owner> <units>",
-- or '') of m, one end recorded in the done key (see wg_save).
local function wg_ended(m)
  local g, ab = string.match(m, '^(%d+):?(.*)$')
  return g, (string.gsub(ab or '', ':', ' '))
end

-- wg_save writes the phase st back, with the entry e if not nil (or
-- drops it with its lease if it has no unit left), in one command: under
-- maxmemory the server refuses it (OOM) whole, which leaves the count and
-- the entries as they were. At a count of 0 it ends the phase instead: its
-- end is recorded in the done key if waiters registered, they are woken
-- (with the grant "<gen + 1>" unless units were abandoned, which they
-- learn from their next attempt), and the state is deleted. Every waiter
-- is woken through pub/sub, the caller's hub's too.
local function wg_save(st, a, e)
  if st.n > 0 then
    local v = e and e.units > 0 and string.format('%d', e.units) .. ' ' .. e.id .. ' ' .. e.ops
    redis.call('HSET', hash, 'n', st.n, 'gen', st.gen, 'ab', st.ab or '', 'keep', st.keep and '1' or '0', v and e.owner or 'n', v or st.n)
    if e and not v then
      redis.call('HDEL', hash, e.owner)
      redis.call('ZREM', holders, e.owner)
    end
    return
  elseif redis.call('EXISTS', waiters) == 1 then
    local list = {st.gen .. (st.ab and (':' .. string.gsub(st.ab, ' ', ':')) or '')}
    for m in string.gmatch(redis.call('GET', done) or '', '%S+') do
      list[#list + 1] = #list < 64 and m or nil
    end
    redis.call('SET', done, table.concat(list, ' '), 'PX', math.max(redis.call('PTTL', waiters), 0) + a.entry_ttl)
    for _, w in ipairs(redis.call('ZRANGE', waiters, 0, -1)) do
      wake(a.channel, w, not st.ab and string.format('%d', st.gen + 1) or nil)
    end
  end
  redis.call('DEL', hash, holders, waiters)
end

-- wg_load returns the phase (a table with n, gen, ab and keep), or nil if
-- there is none. With now_ms, it abandons the units of every owner whose
-- lease ended by then, unless the phase keeps them: they leave the count,
-- and the first such owner is recorded. The waiters need no wake-up: each
-- tries again when the earliest lease ends (see wait.lua). A phase whose
-- count is then 0 ends (see wg_save).
local function wg_load(now_ms)
  local v = redis.call('HMGET', hash, 'n', 'gen', 'ab', 'keep')
  -- A hash that dsync did not write fails the script before any write,
  -- one that has a 'gen' field too: its count must be a number.
  if v[2] and not (tonumber(v[1]) and string.match(v[2], '^%d+$')) or not v[2] and redis.call('EXISTS', hash) == 1 then
    error('DSYNC unexpected value at ' .. hash .. ': not a wait group')
  end
  local st = v[2] and {n = tonumber(v[1]), gen = v[2], ab = v[3] ~= '' and v[3] or nil, keep = v[4] == '1'}
  for _, o in ipairs(st and now_ms and not st.keep and redis.call('ZRANGEBYSCORE', holders, '-inf', now_ms) or {}) do
    local e = wg_entry(o)
    if e then
      st.n, st.ab = st.n - e.units, st.ab or (o .. ' ' .. e.units)
      -- A write that may take memory first: under maxmemory the server
      -- refuses it (OOM) before anything is deleted.
      redis.call('HSET', hash, 'n', st.n, 'ab', st.ab)
      redis.call('HDEL', hash, o)
    end
    redis.call('ZREM', holders, o)
  end
  if st and now_ms and st.n <= 0 then
    wg_save(st, header())
  end
  return st
end
