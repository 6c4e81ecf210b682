-- acquire: take or re-enter the mutex.
-- KEYS[1] lock key (see load); KEYS[2] waiter set.
-- ARGV[1] owner id; ARGV[2] operation id, the same on every retry of one
-- acquisition, so that a retry after a lost reply does not count twice;
-- ARGV[3] lease ms; ARGV[4] waiter entry (see hand_off), '' not to
-- register on failure; ARGV[5] waiter entry ttl ms; ARGV[6] '1' if an
-- earlier attempt registered the waiter, to remove it.
-- Reply: the fencing token of a new hold that the operation took for the
-- lease asked; {1, hold count, token, hold id, remaining ms of the hold}
-- when held by the owner otherwise; {0, remaining ms of the current hold
-- (-1 if it has no expiry), its token} when held by another.
local lock, waiters = KEYS[1], KEYS[2]
local owner, op, entry, registered = ARGV[1], ARGV[2], ARGV[4], ARGV[6] == '1'
local v = redis.pcall('GET', lock)
if type(v) == 'string' and not registered then
  -- The common case, a mutex freed by a release that found no waiter:
  -- one read, one write, before the library is even defined.
  local last = string.match(v, '^(%d+) free$')
  if last then
    local token = tonumber(last) + 1
    redis.call('SET', lock, string.format('%d 1 0 %s %s %s', token, owner, op, op), 'PX', ARGV[3])
    return token
  end
end
-- dsync:library
local s = decode(lock, v)
if s.foreign then
  return unexpected(lock, s.foreign)
end
local ttl = tonumber(ARGV[3])
if not s.owner then
  -- A waiter that registered was likely not alone, and waiters of a hold
  -- whose key went missing may be left unflagged: the release looks.
  s = {token = next_token(s.token), count = 1, waiting = registered or not s.token, owner = owner, id = op, ops = op}
  grant(lock, nil, s, ARGV[3])
elseif s.owner == owner then
  -- A re-entry, a retry whose first reply was lost, or a waiter's attempt
  -- after a hand-off to it (see hand_off).
  if not seen(s.ops, op) then
    s.count = s.count + 1
  end
  s.ops = remember(s.ops, op, now_s(), acquisition_memory(ARGV[3]))
  store_extending(lock, s, ARGV[3])
  ttl = redis.call('PTTL', lock)
else
  if entry ~= '' then
    register(waiters, entry, now(), ARGV[5])
    if not s.waiting then
      s.waiting = true
      store(lock, s)
    end
  end
  return {0, redis.call('PTTL', lock), s.token}
end
if registered then
  redis.call('ZREM', waiters, entry)
end
return {1, s.count, s.token, s.id, ttl}
