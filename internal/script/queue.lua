-- FIFO waiter queues (mutex, fairlock, semaphore, rwlock writers, the
-- election's candidates): two sorted sets of waiter entries,
--
--   queue    scored by arrival: the server time in ms when the entry
--            joined, or a little above the last entry's score if that is
--            not less (a clock that stepped back, or many arrivals within a
--            ms), so that scores only grow; the head's score tells how long
--            it has waited (see head), or, below zero, when a mutex's
--            release woke it to try (see pass_on in exclusive.lua)
--   expiry   scored by the time the entry expires, in ms, which each
--            attempt of its waiter (its heartbeat) pushes back.
--
-- A heartbeat touches expiry only, so arrival order never changes once an
-- entry is in. An entry whose waiter stopped beating is dropped when it
-- reaches the head. Both keys live as long as their longest-lived entry.

-- enqueue adds entry at the tail if it is not queued yet, and makes it
-- expire ttl ms after now_ms either way. fresh says that entry cannot be
-- queued yet, which spares the look for it: the first attempt of an
-- acquisition (not registered, see the header in codec.lua) registers a
-- waiter id of its own, the acquisition's operation id. (A first attempt
-- that reached the server only after its retry, its bytes held up on a
-- connection the client gave up, would move the entry to the tail; such
-- a late attempt could as well take a free primitive.)
local function enqueue(queue, expiry, entry, now_ms, ttl, fresh)
  if fresh or not redis.call('ZSCORE', queue, entry) then
    local last = redis.call('ZRANGE', queue, -1, -1, 'WITHSCORES')
    local at = now_ms
    if last[2] and tonumber(last[2]) >= at then
      -- A 1024th of a ms apart: above the precision a score of 2^41 ms
      -- keeps, 4096ths.
      at = tonumber(last[2]) + 1 / 1024
    end
    redis.call('ZADD', queue, at, entry)
  end
  redis.call('ZADD', expiry, now_ms + tonumber(ttl), entry)
  expire_at_least(queue, ttl)
  expire_at_least(expiry, ttl)
end

-- dequeue removes entry.
local function dequeue(queue, expiry, entry)
  redis.call('ZREM', queue, entry)
  redis.call('ZREM', expiry, entry)
end

-- queue_life returns how long, in ms from now_ms, the longest-lived entry
-- of expiry has left (0 or less if none is live): one command, whatever
-- the queue's length.
local function queue_life(expiry, now_ms)
  local last = redis.call('ZRANGE', expiry, -1, -1, 'WITHSCORES')
  if last[2] then
    return tonumber(last[2]) - now_ms
  end
  return 0
end

-- purge drops every entry expired at now_ms, in batches small enough for
-- Lua's stack.
local function purge(queue, expiry, now_ms)
  while true do
    local dead = redis.call('ZRANGEBYSCORE', expiry, '-inf', now_ms, 'LIMIT', 0, 1000)
    if #dead == 0 then
      return
    end
    redis.call('ZREM', queue, unpack(dead))
    redis.call('ZREM', expiry, unpack(dead))
  end
end

-- head returns the first live entry and the server time in ms it joined
-- the queue at (its score), or false. Two commands when the head is alive,
-- whatever the queue's length; a dead head costs a purge of every expired
-- entry at once. Each round drops the head it looked at unless it returns
-- it, so the loop ends.
local function head(queue, expiry, now_ms)
  while true do
    local r = redis.call('ZRANGE', queue, 0, 0, 'WITHSCORES')
    local h = r[1]
    if not h then
      return false
    end
    local exp = redis.call('ZSCORE', expiry, h)
    if exp and tonumber(exp) > now_ms then
      return h, tonumber(r[2])
    end
    purge(queue, expiry, now_ms)
    if not exp then
      redis.call('ZREM', queue, h) -- no expiry at all: not a live entry
    end
  end
end

-- pop_head removes and returns the first live entry with the server time
-- it read (ms, µs), or false.
local function pop_head(queue, expiry)
  local now_ms, now_us = now()
  local h = head(queue, expiry, now_ms)
  if h then
    dequeue(queue, expiry, h)
  end
  return h, now_ms, now_us
end
