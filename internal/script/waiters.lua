-- Waiter sets in the order "longest without an attempt" (package mutex):
-- a sorted set of waiter entries scored by the time the entry expires, in
-- ms. Entries are renewed by each attempt of their waiter, so the entry
-- with the lowest score is the one that has gone longest without trying.
-- The heartbeat reorders waiters: use a FIFO queue (queue.lua) where
-- order is promised.

-- register adds or refreshes a waiter's entry, which expires after ttl ms.
local function register(waiters_key, entry, now_ms, ttl)
  redis.call('ZADD', waiters_key, now_ms + tonumber(ttl), entry)
  expire_at_least(waiters_key, ttl)
end

-- pop_waiter removes and returns the entry with the lowest score among
-- those not expired, with the server time it read (ms, µs), or false if
-- none is left. With no waiter set it costs one ZPOPMIN; when the first
-- entry has expired (its waiter died), every expired entry is dropped at
-- once.
local function pop_waiter(waiters_key)
  local e = redis.call('ZPOPMIN', waiters_key)
  if not e[1] then
    return false
  end
  local now_ms, now_us = now()
  if tonumber(e[2]) > now_ms then
    return e[1], now_ms, now_us
  end
  redis.call('ZREMRANGEBYSCORE', waiters_key, '-inf', now_ms)
  e = redis.call('ZPOPMIN', waiters_key)
  if e[1] and tonumber(e[2]) > now_ms then
    return e[1], now_ms, now_us
  end
  return false
end
