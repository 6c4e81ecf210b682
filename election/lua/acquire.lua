-- acquire: lead, in turn, or queue as a candidate.
-- KEYS: the election's five (see election_keys).
-- ARGV[1] owner id (fresh for every campaign); ARGV[2] operation id, the
-- same on every retry of one campaign; ARGV[3] lease ms; ARGV[4] waiter
-- entry (see hand_off), '' not to queue on failure; ARGV[5] waiter
-- timeout ms; ARGV[6] '1' if an earlier attempt queued the candidate;
-- ARGV[7] fence ttl ms; ARGV[8] wake channel base; ARGV[9] observe
-- channel; ARGV[10] the candidate's value.
-- Reply: {1, 1, token, hold id, remaining ms of the term} when the
-- candidate leads; {0, remaining ms of the current term (-1 if none or
-- no expiry), the current or last token ('0' if none)} otherwise.
--
-- As the fair lock's acquire (fairlock/lua/acquire.lua): the term goes to
-- the head of the queue, or to anyone if no live candidate is queued,
-- never out of turn; a new term is announced to observers. A queued
-- candidate's value waits in the values hash for the hand-off.
local k = election_keys()
local owner, op, entry, registered = ARGV[1], ARGV[2], ARGV[4], ARGV[6] == '1'
local s = load(k.lock)
if s.foreign then
  return unexpected(k.lock, s.foreign)
end
if s.owner == owner then
  -- A retry whose first reply was lost, or the attempt of a candidate
  -- the term was handed to: the term was announced when it began.
  if not seen(s.ops, op) then
    s.count = s.count + 1
  end
  s.ops = remember(s.ops, op, now_s(), acquisition_memory(ARGV[3]))
  store_extending(k.lock, s, ARGV[3])
  if registered then
    dequeue(k.queue, k.expiry, entry)
    redis.pcall('HDEL', k.values, entry)
  end
  return {1, s.count, s.token, s.id, redis.call('PTTL', k.lock)}
end
local now_ms, now_us = now()
local h = false
if not s.owner then
  h = head(k.queue, k.expiry, now_ms)
  if not h or h == entry then
    -- Every read that may fail before any write: a foreign leader key
    -- leaves the election as it was.
    local rev, _, last, err = leader_rev(k.leader)
    if err then
      return err
    end
    local token = next_token(s.token or last, nil, now_us)
    if h then
      dequeue(k.queue, k.expiry, h)
      redis.pcall('HDEL', k.values, h)
    end
    s = {token = token, count = 1, waiting = h ~= false, owner = owner, id = op, ops = op}
    grant(k.lock, nil, s, ARGV[3], ARGV[7])
    begin_term(k.leader, ARGV[9], rev, op, token, ARGV[10], now_ms, ARGV[3], ARGV[7])
    return {1, 1, s.token, s.id, tonumber(ARGV[3])}
  end
end
if entry ~= '' then
  enqueue(k.queue, k.expiry, entry, now_ms, ARGV[5])
  local ok = redis.pcall('HSET', k.values, entry, ARGV[10])
  if type(ok) == 'table' and ok.err then
    return unexpected(k.values, ok.err)
  end
  expire_at_least(k.values, ARGV[5])
  prune_values(k.values, k.queue, 16)
  if s.owner and not s.waiting then
    s.waiting = true
    store(k.lock, s)
  end
end
if not s.owner then
  wake(ARGV[8], h)
  return {0, -1, s.token or '0'}
end
return {0, redis.call('PTTL', k.lock), s.token}
