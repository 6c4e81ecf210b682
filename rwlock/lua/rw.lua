-- The read-write lock's state, shared by its scripts. Every script but the
-- renewal takes the same keys, all in one Cluster slot:
--
--   KEYS[1] write   the write hold, in the exclusive state of exclusive.lua
--                   (token, count, owner, hold id, ops), expiring with its
--                   lease; freed, "<token> free" for the fence ttl
--   KEYS[2] readers hash: owner id -> "<token> <count> <hold id> <ops>"
--   KEYS[3] rexpiry sorted set: owner id -> its read hold's expiry (server
--                   ms); a read hold whose expiry has passed is gone, and
--                   dropped from both by the next script that looks
--   KEYS[4] wqueue  writers waiting, FIFO (queue.lua), with
--   KEYS[5] wexpiry their expiry, pushed back by each attempt
--   KEYS[6] rwait   readers waiting (waiters.lua), handed the lock together
--   KEYS[7] fence   the last fencing token (fence.lua)
--
-- Tokens come from one sequence: a write hold and a read hold handed to
-- a waiter draw the next one (a waiter refuses a grant whose token it has
-- seen before, see package wait); a read hold taken directly starts with
-- the last one. A write hold's token is thus above that of every hold
-- before it, read or write. As in package mutex, the last token is kept
-- twice, by the fence key and by the free write key, which a read hold
-- that draws a token updates too.
local W, R, RX, WQ, WX, RW, FENCE = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]

-- rw_next_token returns the token after every one handed out (see
-- next_token): after the greater of the write key's copy (last, or nil)
-- and the fence key's. Both are current: a read hold that draws a token
-- while the write key is free writes it there too (see note_free_token).
local function rw_next_token(last, now_us)
  local f = redis.pcall('GET', FENCE)
  if type(f) == 'table' or (f and not tonumber(f)) then
    error('DSYNC unexpected value at ' .. FENCE)
  end
  if f and (not last or tonumber(f) > tonumber(last)) then
    last = f
  end
  return next_token(last, FENCE, now_us)
end

-- note_free_token records token, drawn by a read hold, at the free write
-- key too, for the fence ttl: the fence key alone would not outlive its
-- loss (see fence.lua).
local function note_free_token(token, fence_ttl)
  redis.call('SET', W, token .. ' free', 'PX', fence_ttl)
end

-- current_token returns the last token handed out, '0' if none is known:
-- what a failed attempt reports, so that its waiter refuses older grants.
local function current_token(last)
  local f = redis.pcall('GET', FENCE)
  if type(f) ~= 'table' and tonumber(f) and (not last or tonumber(f) > tonumber(last)) then
    return f
  end
  return last or '0'
end

-- load_reader returns owner's read hold if it is live at now_ms: a table
-- with token, count, id, ops and its expiry exp; else nil.
local function load_reader(owner, now_ms)
  local exp = redis.call('ZSCORE', RX, owner)
  if not exp or tonumber(exp) <= now_ms then
    return nil
  end
  local v = redis.call('HGET', R, owner)
  local token, count, id, ops = string.match(v or '', '^(%d+) (%d+) (%S+) ?(.*)$')
  if not token then
    return nil
  end
  return {token = token, count = tonumber(count), id = id, ops = ops, exp = tonumber(exp)}
end

-- store_reader writes owner's read hold r, expiring at exp (server ms).
local function store_reader(owner, r, exp, now_ms)
  redis.call('HSET', R, owner, r.token .. ' ' .. string.format('%d', r.count) .. ' ' .. r.id .. ' ' .. r.ops)
  redis.call('ZADD', RX, exp, owner)
  local ttl = exp - now_ms
  expire_at_least(R, ttl)
  expire_at_least(RX, ttl)
end

-- drop_reader removes owner's read hold.
local function drop_reader(owner)
  redis.call('HDEL', R, owner)
  redis.call('ZREM', RX, owner)
end

-- purge_readers drops the read holds expired at now_ms: their holders'
-- processes died, or lost them.
local function purge_readers(now_ms)
  local dead = redis.call('ZRANGEBYSCORE', RX, '-inf', now_ms, 'LIMIT', 0, 1000)
  while #dead > 0 do
    redis.call('HDEL', R, unpack(dead))
    redis.call('ZREM', RX, unpack(dead))
    dead = redis.call('ZRANGEBYSCORE', RX, '-inf', now_ms, 'LIMIT', 0, 1000)
  end
end

-- first_read_expiry returns the ms until the earliest read hold expires,
-- or -1 if none is held.
local function first_read_expiry(now_ms)
  local e = redis.call('ZRANGE', RX, 0, 0, 'WITHSCORES')
  if e[2] then
    return math.max(tonumber(e[2]) - now_ms, 0)
  end
  return -1
end

-- parse_entry splits a waiter's entry "<hubid>/<op>|<ttl ms>|<owner>".
local function parse_entry(w)
  return string.match(w, '^[^/|]+/([^|]+)|(%d+)|(.*)$')
end

-- announce wakes the waiter of entry w with its grant (the token; '' for
-- a wake-up without one), unless it is in the caller's process (which
-- delivers it from the reply), and appends the waiter's address, grant and
-- owner to out.
local function announce(out, w, token, owner, channel, process)
  if not local_to(w, process) then
    wake(channel, w, token ~= '' and token or nil)
  end
  out[#out + 1] = string.match(w, '^[^|]+')
  out[#out + 1] = token
  out[#out + 1] = owner
end

-- pass_on hands the lock, whose write hold is free, to whom it is due,
-- and appends each waiter it handed it to (see announce) to out:
--
--   - every waiting reader at once, if readers wait and the lock was just
--     freed of a write hold (after_write), or no writer waits, or readers
--     are preferred (prefer 'r'): readers that waited out a write go
--     before the next writer, so neither side starves;
--   - else, once no read hold is left, the writer at the head of the
--     queue.
--
-- a holds the caller's channel base, process id, preference and fence
-- ttl, and last, the write key's copy of the last token (nil if none).
local function pass_on(out, after_write, a)
  local now_ms, now_us = now()
  purge_readers(now_ms)
  local h = head(WQ, WX, now_ms)
  local token = a.last
  if (after_write or not h or a.prefer == 'r') and redis.call('EXISTS', RW) == 1 then
    local handed, drew = false, false
    local w = pop_waiter(RW)
    while w do
      local op, ttl, owner = parse_entry(w)
      if op then
        local r = load_reader(owner, now_ms)
        if r then
          -- The owner holds a read hold (another of its waiters was
          -- handed one just now, say): the waiter's acquisition joins
          -- it, counted at once, so that the hold outlives its other
          -- holders' releases. The hold's id is not the waiter's, so
          -- the waiter is woken without a grant: its next attempt finds
          -- its acquisition done and learns the id.
          r.count = r.count + 1
          r.ops = remember(r.ops, op, math.floor(now_ms / 1000), acquisition_memory(ttl))
          store_reader(owner, r, math.max(r.exp, now_ms + tonumber(ttl)), now_ms)
          announce(out, w, '', owner, a.channel, a.process)
        else
          token = rw_next_token(token, now_us)
          drew = true
          local r = {token = token, count = 1, id = op, ops = op}
          record_token(FENCE, token, a.fence_ttl)
          store_reader(owner, r, now_ms + tonumber(ttl), now_ms)
          announce(out, w, r.token, owner, a.channel, a.process)
        end
        handed = true
      end
      w = pop_waiter(RW)
    end
    if drew then
      note_free_token(token, a.fence_ttl)
    end
    if handed then
      return
    end
  end
  if not h or redis.call('EXISTS', RX) == 1 then
    return
  end
  dequeue(WQ, WX, h)
  local op, ttl, owner = parse_entry(h)
  while not op do -- not a waiter's entry: skip it
    h = head(WQ, WX, now_ms)
    if not h then
      return
    end
    dequeue(WQ, WX, h)
    op, ttl, owner = parse_entry(h)
  end
  token = rw_next_token(token, now_us)
  grant(W, FENCE, {token = token, count = 1, waiting = true, owner = owner, id = op, ops = op}, ttl, a.fence_ttl)
  announce(out, h, token, owner, a.channel, a.process)
end
