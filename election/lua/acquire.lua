-- acquire: lead, in turn, or queue as a candidate.
-- KEYS: the election's five (see election_keys).
-- ARGV: the header (see codec.lua), the owner fresh for every campaign;
-- ARGV[12] fence ttl ms; ARGV[13] observe channel; ARGV[14] the
-- candidate's value.
-- Reply: an attempt's (see codec.lua).
--
-- As the fair lock's acquire (fairlock/lua/acquire.lua): the term goes to
-- the head of the queue, or to anyone if no live candidate is queued,
-- never out of turn; a new term is announced to observers. A queued
-- candidate's value waits in the values hash for the hand-off.
local k = election_keys()
local a = header()
local owner, op, entry, registered = a.owner, a.op, a.entry, a.registered
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
  s.ops = remember(s.ops, op, now_s(), acquisition_memory(a.lease))
  store_extending(k.lock, s, a.lease)
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
    store(k.lock, s, a.lease)
    begin_term(k.leader, ARGV[13], rev, op, token, ARGV[14], now_ms, a.lease, ARGV[12])
    return {1, 1, s.token, s.id, tonumber(a.lease)}
  end
end
if entry ~= '' then
  enqueue(k.queue, k.expiry, entry, now_ms, a.entry_ttl)
  local ok = redis.pcall('HSET', k.values, entry, ARGV[14])
  if type(ok) == 'table' and ok.err then
    return unexpected(k.values, ok.err)
  end
  expire_at_least(k.values, a.entry_ttl)
  prune_values(k.values, k.queue, 16)
  if s.owner then
    flag_waiting(k.lock, s)
  end
end
if not s.owner then
  wake(a.channel, h)
  return not_acquired(-1, s.token)
end
return not_acquired(redis.call('PTTL', k.lock), s.token)
