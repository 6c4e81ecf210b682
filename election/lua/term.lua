-- The election's state besides the term itself, which is an exclusive
-- hold at the main key (exclusive.lua), and the queue of candidates
-- (queue.lua):
--
--   values   hash: a queued candidate's entry -> the value it campaigns
--            with, which becomes the leader's value when the term is
--            handed to it; an entry leaves it when it leaves the queue
--   leader   hash: rev, the number of the latest change announced to
--            observers; and, of the term announced last, id (its hold
--            id; deleted once its end is announced), token, began (the
--            server's time in ms, 0 if unknown) and value
--
-- Every change that observers can tell apart (a term begins, its value
-- changes, the election lapses) bumps rev and is published on the observe
-- channel as
--
--   "<rev> <lapsed 0|1> <token> <began ms> <ttl ms> <value>"
--
-- which is also the head of what a read replies (see read_leader).
-- Observers order states by rev, then lapsed: the lapse of a term that
-- ran out with nobody to announce it, which a read finds, comes after the
-- term at the same rev. A missing rev is seeded from the server clock in
-- µs, as a token is (see fence.lua), so that it keeps growing across a
-- deleted leader hash; a read reports the clock then, and a write one
-- more.
--
-- The leader hash outlives every term by the fence ttl, so a companion
-- that is gone while a term is on was deleted behind the election's back:
-- reads then report the term with an empty value.

-- leader_rev returns the leader hash's rev (a number, or nil) and the id
-- of the term announced last (or false), and an error reply if the key
-- holds something else.
local function leader_rev(leader)
  local v = redis.pcall('HMGET', leader, 'rev', 'id')
  if v.err then
    return nil, false, unexpected(leader, v.err)
  end
  return tonumber(v[1]), v[2]
end

-- bump returns the rev that follows rev, seeded from the clock if nil.
local function bump(rev)
  if rev then
    return rev + 1
  end
  local _, now_us = now()
  return now_us + 1
end

-- publish_state tells observers of a state.
local function publish_state(channel, rev, lapsed, token, began, ttl, value)
  redis.call('PUBLISH', channel, string.format('%d %d %s %d %d ', rev, lapsed, token, began, ttl) .. value)
end

-- begin_term records and announces the term with hold id id and the
-- given token and value, begun at the server time began (ms, 0 if
-- unknown), whose hold expires in ttl ms; the leader hash lives at least
-- keep ms more. It returns the new rev.
local function begin_term(leader, channel, rev, id, token, value, began, ttl, keep)
  rev = bump(rev)
  redis.call('HSET', leader, 'rev', string.format('%d', rev), 'id', id, 'token', token,
    'began', string.format('%d', began), 'value', value)
  expire_at_least(leader, math.max(tonumber(ttl), tonumber(keep)))
  publish_state(channel, rev, 0, token, began, ttl, value)
  return rev
end

-- announce_lapse records and announces that no term is on, the last
-- token being token (nil if unknown); the leader hash lives at least keep
-- ms more.
local function announce_lapse(leader, channel, rev, token, keep)
  rev = bump(rev)
  redis.call('HSET', leader, 'rev', string.format('%d', rev))
  redis.call('HDEL', leader, 'id')
  expire_at_least(leader, keep)
  publish_state(channel, rev, 1, token or '0', 0, 0, '')
end

-- last_token returns the token of state s, or the one kept at fence, or
-- '0'.
local function last_token(s, fence)
  if s.token then
    return s.token
  end
  local t = redis.pcall('GET', fence)
  if type(t) == 'string' and tonumber(t) then
    return t
  end
  return '0'
end

-- read_leader returns the election's observable state: {rev, lapsed,
-- token, began ms, ttl ms, value, holder's owner id, hold id}, the token
-- being the last one when lapsed; or nil and an error reply for a key
-- that dsync did not write.
local function read_leader(lock, fence, leader)
  local s = load(lock)
  if s.foreign then
    return nil, unexpected(lock, s.foreign)
  end
  local v = redis.pcall('HMGET', leader, 'rev', 'id', 'began', 'value')
  if v.err then
    return nil, unexpected(leader, v.err)
  end
  local rev = tonumber(v[1])
  if not rev then
    local _, now_us = now()
    rev = now_us
  end
  rev = string.format('%d', rev)
  if not s.owner then
    return {rev, 1, last_token(s, fence), 0, 0, '', '', ''}
  end
  local ttl = redis.call('PTTL', lock)
  if v[2] == s.id then
    return {rev, 0, s.token, tonumber(v[3]) or 0, ttl, v[4] or '', s.owner, s.id}
  end
  return {rev, 0, s.token, 0, ttl, '', s.owner, s.id}
end

-- pass_on hands the election on from state s, whose term ends or which
-- is free, to the next live candidate, as hand_off does, announcing the
-- new term with the value the candidate queued with; if nobody is queued
-- and ended is true (a term was on), it announces the lapse. k holds the
-- keys (lock, queue, expiry, fence, values, leader); a the wake channel
-- base, the fence ttl, the caller's hub id and the observe channel (wake,
-- fence_ttl, hub, observe); rev is the leader hash's. It returns the
-- candidate's address, token and owner id, or nothing.
local function pass_on(k, a, s, rev, ended)
  local popped, at
  local address, token, owner = hand_off(k.lock, k.fence, s, a.wake, a.fence_ttl, a.hub, function()
    local e, now_ms, now_us = pop_head(k.queue, k.expiry)
    popped, at = e, now_ms
    return e, now_ms, now_us
  end)
  if address then
    local id, ttl = string.match(popped, '^[^/|]+/([^|]+)|(%d+)|')
    local value = redis.pcall('HGET', k.values, popped)
    if type(value) ~= 'string' then
      value = ''
    end
    redis.pcall('HDEL', k.values, popped)
    begin_term(k.leader, a.observe, rev, id, token, value, at, ttl, a.fence_ttl)
    return address, token, owner
  end
  if ended then
    announce_lapse(k.leader, a.observe, rev, s.token, a.fence_ttl)
  end
end

-- prune_values drops the values of candidates no longer queued (their
-- waiters died and were purged from the queue) once they outnumber the
-- queue by slack: a few commands per enqueue, and a scan now and then.
local function prune_values(values, queue, slack)
  local n = redis.pcall('HLEN', values)
  if type(n) ~= 'number' or n <= redis.call('ZCARD', queue) + slack then
    return
  end
  for _, e in ipairs(redis.call('HKEYS', values)) do
    if not redis.call('ZSCORE', queue, e) then
      redis.call('HDEL', values, e)
    end
  end
end

-- election_keys returns the keys of a script called with the election's
-- six keys in their usual order.
local function election_keys()
  return {lock = KEYS[1], queue = KEYS[2], expiry = KEYS[3], fence = KEYS[4], values = KEYS[5], leader = KEYS[6]}
end
