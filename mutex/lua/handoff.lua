-- hand_off frees the mutex and wakes one waiter, removing its entry (a
-- live waiter that does not get the mutex registers again).
--
-- A starving waiter sorts first, and the mutex is reserved for it: the
-- lock hash becomes {reserved = its address} for window ms, during which
-- only that waiter can take it. Any other woken waiter races whoever else
-- asks, usually the client that just released, which keeps throughput
-- high; losing costs it one attempt and brings it closer to starving.
-- Without waiters the lock hash is simply deleted.
local function hand_off(lock, waiters, channel, window)
  redis.call('DEL', lock)
  local w, starving = pop_waiter(waiters)
  if not w then
    return
  end
  if starving then
    redis.call('HSET', lock, 'reserved', w)
    redis.call('PEXPIRE', lock, window)
  end
  wake(channel, w)
end

