-- FIFO waiter queues (fairlock; later semaphore and rwlock writers): two
-- sorted sets of waiter entries,
--
--   queue    scored by arrival: one above the last entry's score when the
--            entry joined, taken from the server, never a client clock;
--   expiry   scored by the time the entry expires, in ms, which each
--            attempt of its waiter (its heartbeat) pushes back.
--
-- A heartbeat touches expiry only, so arrival order never changes once an
-- entry is in. An entry whose waiter stopped beating is dropped when it
-- reaches the head. Both keys live as long as their longest-lived entry.

-- enqueue adds entry at the tail if it is not queued yet, and makes it
-- expire ttl ms after now_ms either way.
local function enqueue(queue, expiry, entry, now_ms, ttl)
  if not redis.call('ZSCORE', queue, entry) then
    local last = redis.call('ZRANGE', queue, -1, -1, 'WITHSCORES')
    local seq = 1
    if last[2] then
      seq = tonumber(last[2]) + 1
    end
    redis.call('ZADD', queue, seq, entry)
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

-- head returns the first live entry, or false. Two commands when the
-- head is alive, whatever the queue's length; a dead head costs a purge
-- of every expired entry at once. Each round drops the head it looked at
-- unless it returns it, so the loop ends.
local function head(queue, expiry, now_ms)
  while true do
    local h = redis.call('ZRANGE', queue, 0, 0)[1]
    if not h then
      return false
    end
    local exp = redis.call('ZSCORE', expiry, h)
    if exp and tonumber(exp) > now_ms then
      return h
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
