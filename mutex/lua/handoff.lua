-- hand_off frees the mutex and hands it to the waiter that sorts first
-- (see pop_waiter), if any: the lock hash becomes that waiter's hold, with
-- a fresh fencing token, for as long as the waiter asked. It returns the
-- waiter's address, the token and the waiter's owner id, or nothing. The
-- waiter learns it holds the mutex from its wake-up alone, without another
-- round trip: the caller wakes a waiter of its own process (hub id prefix process) when
-- the reply arrives; a waiter elsewhere is woken by a message carrying the
-- token. If the wake-up is lost, the waiter's next attempt finds the hold
-- already its own. Without waiters the lock hash is simply deleted.
--
-- A mutex waiter's entry is "<hubid>/<operation id>|<ttl ms>|<owner id>":
-- the hold it is handed counts as the acquisition with that operation id,
-- so that the waiter's retry, or its abandon, recognises it.
local function hand_off(lock, waiters, fence, channel, fence_ttl, process)
  local w, _, now_us = pop_waiter(waiters)
  while w do
    local op, ttl, owner = string.match(w, '^[^/|]+/([^|]+)|(%d+)|(.*)$')
    if op then
      local token = string.format('%d', next_token(fence, now_us, fence_ttl))
      -- Every field is overwritten: no DEL needed.
      redis.call('HSET', lock, 'owner', owner, 'count', 1, 'token', token, 'ops', op)
      redis.call('PEXPIRE', lock, ttl)
      if string.sub(w, 1, #process + 1) ~= process .. '.' then
        wake(channel, w, token)
      end
      return string.match(w, '^[^|]+'), token, owner
    end
    w, _, now_us = pop_waiter(waiters) -- not a mutex waiter's entry: skip it
  end
  redis.call('DEL', lock)
end
