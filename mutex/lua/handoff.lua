-- hand_off frees the mutex for the waiter it wakes: the lock hash becomes
-- {reserved = waiter id} for window ms, during which only that waiter can
-- take it. A mutex under contention thus passes from holder to waiter
-- instead of going back to whichever client asks first, usually the one
-- that just released it; a reservation whose waiter does not come expires.
-- Without waiters the lock hash is simply deleted.
local function hand_off(lock, waiters, channel, window)
  redis.call('DEL', lock)
  local w = wake_next(waiters, channel)
  if w then
    redis.call('HSET', lock, 'reserved', w)
    redis.call('PEXPIRE', lock, window)
  end
end

