-- hand_off frees the mutex and hands it to the waiter that sorts first
-- (see pop_waiter), if any: the lock hash becomes that waiter's hold, with
-- a fresh fencing token, for as long as the waiter asked, and the waiter
-- is woken with the token. The waiter learns it holds the mutex from the
-- wake-up alone, without another round trip; if the wake-up is lost, its
-- next attempt finds the hold already its own. Without waiters the lock
-- hash is simply deleted.
--
-- A mutex waiter's entry is "<hubid>/<operation id>|<ttl ms>|<owner id>":
-- the hold it is handed counts as the acquisition with that operation id,
-- so that the waiter's retry, or its abandon, recognises it.
local function hand_off(lock, waiters, fence, channel, fence_ttl)
  local w, _, now_us = pop_waiter(waiters)
  while w do
    local op, ttl, owner = string.match(w, '^[^/|]+/([^|]+)|(%d+)|(.*)$')
    if op then
      local token = string.format('%d', next_token(fence, now_us, fence_ttl))
      -- Every field is overwritten: no DEL needed.
      redis.call('HSET', lock, 'owner', owner, 'count', 1, 'token', token, 'ops', op)
      redis.call('PEXPIRE', lock, ttl)
      wake(channel, w, token)
      return
    end
    w, _, now_us = pop_waiter(waiters) -- not a mutex waiter's entry: skip it
  end
  redis.call('DEL', lock)
end
