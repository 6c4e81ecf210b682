-- abandon: clean up after an acquisition that failed or was given up:
-- leave the waiter set, undo the acquisition if its reply was lost, and if
-- the mutex is free or was handed off to this waiter, pass it on.
-- KEYS[1] lock hash; KEYS[2] waiter set.
-- ARGV[1] owner id; ARGV[2] operation id of the acquisition;
-- ARGV[3] waiter address; ARGV[4] wake channel base;
-- ARGV[5] hand-off window ms.
-- Reply: 1 if an acquisition was undone, else 0.
local lock, waiters = KEYS[1], KEYS[2]
local owner, op = ARGV[1], ARGV[2]
redis.call('ZREM', waiters, ARGV[3])
local h = redis.call('HMGET', lock, 'owner', 'ops', 'count', 'reserved')
if h[1] == owner and seen(h[2], op) then
  local count = tonumber(h[3]) - 1
  if count > 0 then
    -- Forgetting the id keeps a retried abandon from undoing another hold.
    redis.call('HSET', lock, 'count', count, 'ops', forget(h[2], op))
    return 1
  end
  hand_off(lock, waiters, ARGV[4], ARGV[5])
  return 1
end
if h[1] == false and (h[4] == false or h[4] == ARGV[3]) then
  hand_off(lock, waiters, ARGV[4], ARGV[5])
end
return 0
