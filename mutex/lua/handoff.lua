-- hand_off frees the mutex, whose state is s (see load), and hands it to
-- the waiter that sorts first (see pop_waiter), if any: the lock key
-- becomes that waiter's hold, with the next fencing token, for as long as
-- the waiter asked (see grant). It returns the waiter's address, the token and the
-- waiter's owner id, or nothing. The waiter learns it holds the mutex
-- from its wake-up alone, without another round trip: the caller wakes a
-- waiter of its own process (hub id prefix process) when the reply
-- arrives; a waiter elsewhere is woken by a message carrying the token.
-- If the wake-up is lost, the waiter's next attempt finds the hold
-- already its own. Without waiters only the token is left (see free).
-- A hold that no waiter registered behind (waiting 0) is freed without a
-- look at the waiter set.
--
-- A mutex waiter's entry is "<hubid>/<operation id>|<ttl ms>|<owner id>":
-- the hold it is handed counts as the acquisition with that operation id,
-- so that the waiter's retry, or its abandon, recognises it.
local function hand_off(lock, waiters, fence, s, channel, fence_ttl, process)
  if s.owner and not s.waiting then
    free(lock, s, fence_ttl)
    return
  end
  local w, _, now_us = pop_waiter(waiters)
  while w do
    local op, ttl, owner = string.match(w, '^[^/|]+/([^|]+)|(%d+)|(.*)$')
    if op then
      local token = next_token(s, fence, now_us)
      -- More waiters may be left: the next release looks again.
      grant(lock, fence, {token = token, count = 1, waiting = true, owner = owner, ops = op}, ttl, fence_ttl)
      if string.sub(w, 1, #process + 1) ~= process .. '.' then
        wake(channel, w, token)
      end
      return string.match(w, '^[^|]+'), token, owner
    end
    w, _, now_us = pop_waiter(waiters) -- not a mutex waiter's entry: skip it
  end
  free(lock, s, fence_ttl)
end
