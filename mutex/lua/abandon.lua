-- abandon: clean up after an acquisition that failed or was given up:
-- leave the waiter set, undo the acquisition if its reply was lost, and if
-- the mutex is free, pass on the wake-up this waiter may have swallowed.
-- KEYS[1] lock hash; KEYS[2] waiter set.
-- ARGV[1] owner id; ARGV[2] operation id of the acquisition;
-- ARGV[3] waiter id; ARGV[4] wake channel.
-- Reply: 1 if an acquisition was undone, else 0.
local lock, waiters = KEYS[1], KEYS[2]
local owner, op = ARGV[1], ARGV[2]
redis.call('ZREM', waiters, ARGV[3])
local holder = redis.call('HGET', lock, 'owner')
local now_ms = now()
if holder == owner and redis.call('HGET', lock, 'op') == op then
  if redis.call('HINCRBY', lock, 'count', -1) > 0 then
    -- A retried abandon must not undo a second hold.
    redis.call('HSET', lock, 'op', 'abandoned:' .. op)
    return 1
  end
  redis.call('DEL', lock)
  wake_next(waiters, ARGV[4], now_ms)
  return 1
end
if holder == false then
  wake_next(waiters, ARGV[4], now_ms)
end
return 0
