-- acquire: lead, in turn, or queue as a candidate.
-- KEYS: the election's five (see election_keys).
-- ARGV: the header (see codec.lua), the owner fresh for every campaign;
-- ARGV[12] fence ttl ms; ARGV[13] observe channel; ARGV[14] the
-- candidate's value.
-- Reply: an attempt's (see codec.lua): 0 for a term taken as a plain
-- campaign takes it, its token not drawn yet.
--
-- As the fair lock's acquire (fairlock/lua/acquire.lua): the term goes to
-- the head of the queue, or to anyone if no live candidate is queued,
-- never out of turn; a new term is announced to observers. A queued
-- candidate's value waits in the values hash for the hand-off.
if ARGV[10] == '0' and redis.call('SET', KEYS[1], ARGV[4], 'NX', 'PX', ARGV[5]) then
  -- The common case: nobody leads and nobody is queued, which the main
  -- key's absence tells (it exists whenever a live candidate is queued,
  -- see a.turn in exclusive.lua). The term is taken as a plain campaign
  -- takes it, and observers are told to read it (see term.lua).
  redis.call('PUBLISH', ARGV[13], 'term')
  return 0
end
-- dsync:library
local k = election_keys()
local a = header()
a.turn = k.expiry
local s = load(k.lock)
if s.foreign then
  return unexpected(k.lock, s.foreign)
end
local err = convert(k.lock, k.leader, s, ARGV[13])
if err then
  return err
end
if s.owner == a.owner then
  -- A retry whose first reply was lost, or the attempt of a candidate
  -- the term was handed to: the term was announced when it began.
  enter(k.lock, s, a)
  if a.registered then
    dequeue(k.queue, k.expiry, a.entry)
    redis.pcall('HDEL', k.values, a.entry)
  end
  return acquired(k.lock, s)
end
local now_ms, now_us = now()
local h = false
if not s.owner then
  h = head(k.queue, k.expiry, now_ms)
  if not h or h == a.entry then
    -- Every read that may fail before any write: a foreign leader key
    -- leaves the election as it was.
    local rev, _, last, err = leader_rev(k.leader)
    if err then
      return err
    end
    if h then
      dequeue(k.queue, k.expiry, h)
      redis.pcall('HDEL', k.values, h)
    end
    -- The leader state is the fence: the next token follows its own when
    -- the main key is gone.
    s.token = s.token or last
    local t = take(k.lock, s, a, h ~= false, now_us)
    begin_term(k.leader, ARGV[13], rev, a.op, t.token, ARGV[14], now_ms, a.lease, ARGV[12])
    return {1, 1, t.token, t.id, tonumber(a.lease)}
  end
end
if a.entry ~= '' then
  if not s.owner and not s.token then
    -- The main key is missing with a live candidate queued: it was
    -- deleted behind the election's back. Its free marker (see keep_turn)
    -- keeps the leader state's token.
    local _, _, last = leader_rev(k.leader)
    if last then
      mark_free(k.lock, last, a.entry_ttl)
      s.token = last
    end
  end
  enqueue(k.queue, k.expiry, a.entry, now_ms, a.entry_ttl, not a.registered)
  local ok = redis.pcall('HSET', k.values, a.entry, ARGV[14])
  if type(ok) == 'table' and ok.err then
    return unexpected(k.values, ok.err)
  end
  expire_at_least(k.values, a.entry_ttl)
  prune_values(k.values, k.queue, 16)
  keep_turn(k.lock, s, a.entry_ttl, now_ms)
end
if not s.owner then
  wake(a.channel, h)
  return not_acquired(-1, s.token)
end
return not_acquired(hold_left(k.lock, s), s.token)
