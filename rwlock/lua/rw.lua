-- The read-write lock's state, shared by its scripts. Every script but the
-- renewals takes the same keys, all in one Cluster slot:
--
--   KEYS[1] W       the lock's state and its last fencing token (below)
--   KEYS[2] R       read holds: owner id -> "<token> <count> <hold id> <ops>"
--   KEYS[3] RX      sorted set: owner id -> its read hold's expiry (server
--                   ms); a read hold whose expiry has passed is gone, and
--                   dropped from both by the next script that looks
--   KEYS[4] WQ      writers waiting, FIFO (queue.lua), with
--   KEYS[5] WX      their expiry, pushed back by each attempt
--   KEYS[6] RW      readers waiting (waiters.lua), handed the lock together
--
-- W is one string, in one of these forms:
--
--   "<owner> <hold id>", "<token> <count> <waiting> <owner> <hold id> <ops>"
--       a write hold, in the exclusive state of codec.lua (plain or full),
--       expiring with its lease; plain, or waiting 0, promises that
--       nothing else is there: no read hold (its owner's included) and no
--       waiter; with anything behind it (a waiter, or its owner's read
--       hold after a downgrade) it is in the end form, its key living on
--       past the hold's end for as long as they need it (see a.turn in
--       exclusive.lua, which rw_turn is here), and once that end has
--       passed it reads as missing, with its token
--   "<owner> <hold id> r", "<token> r <count> <owner> <hold id> <ops>"
--       a lone read hold, plain (taken by one SET NX: count 1, no token
--       drawn) or full, expiring with its lease, and nothing else
--   "<token> shared"
--       no write hold; read holds in R and RX, or waiters, or both; it
--       expires no sooner than any of them, and turn_margin ms later (see
--       rw_outlive)
--
-- or missing. W outlives everything else on the lock, so that W missing
-- means nothing is on it: no live read hold and no live waiter. A lone
-- writer or a lone reader therefore takes the lock with one plain SET NX
-- of W (the client's, or the acquire script's), and frees it with one
-- DEL, as the mutex does; anything else is on the other keys, which every
-- other case reads. Every script that writes a read hold or a waiter's
-- entry makes W outlive it (see rw_keep), and the last write hold's end,
-- a release or a departed waiter settle W again (see rw_settle). Only a W
-- deleted or evicted behind dsync's back leaves read holds or waiters
-- without it: the read holds are lost then (see rw_load, which also
-- drops every other owner's read hold beside a live write hold;
-- renew_read.lua drops the ones it renews), and a script that finds waiters
-- writes W back as "<token> shared". ("<token> free", which W held once a
-- lone holder was gone, is read as missing.)
--
-- Tokens come from one sequence (see fence.lua), kept in W while it knows
-- the last one: a write hold, and a read hold handed to a waiter, draw the
-- next one (a waiter refuses a grant whose token it has seen before, see
-- package wait); a read hold taken directly starts with the last one, or
-- draws one if W has none. A write hold's token is thus above that of
-- every hold before it, read or write.
local W, R, RX, WQ, WX, RW = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]

-- rw_turn lists the expiry keys of whatever may be behind a write hold:
-- the waiting writers', the waiting readers' and the read holds' (see
-- a.turn in exclusive.lua).
local rw_turn = {WX, RW, RX}

-- rw_outlive makes key, W (or the W of a renewal's hold), outlive by
-- turn_margin ms (see exclusive.lua) an entry of RX, WX or RW just written
-- to expire ttl ms from now: the entry's expiry is counted from the
-- script's TIME, the key's from when the script began (a server that
-- freezes a script's time at its start: Redis since 7.2), which may be
-- earlier by the script's run so far. Without the margin W could expire
-- before a read hold or a waiter's entry, and a plain SET NX take the lock
-- while the hold still counts. A ttl of 0 changes nothing (a renewal's
-- check of a fixed lease).
local function rw_outlive(key, ttl)
  ttl = tonumber(ttl)
  if ttl > 0 then
    expire_at_least(key, ttl + turn_margin)
  end
end

-- rw_header returns the header (see codec.lua) of a script of the lock,
-- which keeps what is behind a write hold (see rw_turn).
local function rw_header()
  local a = header()
  a.turn = rw_turn
  return a
end

-- rw_decode reads v, the reply of a GET of W by pcall: a table with kind
-- 'write' (and the fields of decode in codec.lua), 'read' (token, count,
-- owner, id, ops), 'shared' (token), or 'missing' (with token if W knows
-- the last one: a write hold past its end, or "<token> free"); with
-- foreign set when W holds something else.
local function rw_decode(v)
  if type(v) == 'string' then
    local token, count, owner, id, ops = string.match(v, '^(%d+) r (%d+) (%S+) (%S+) ?(.*)$')
    if token then
      return {kind = 'read', token = token, count = tonumber(count), owner = owner, id = id, ops = ops}
    end
    owner, id = string.match(v, '^(%x+) (%x+) r$')
    if owner then
      return {kind = 'read', count = 1, owner = owner, id = id, ops = id, plain = true}
    end
    token = string.match(v, '^(%d+) shared$')
    if token then
      return {kind = 'shared', token = token}
    end
  end
  local s = decode(W, v)
  if not s.foreign then
    s.kind = s.owner and 'write' or 'missing'
  end
  return s
end

-- rw_load decodes W from v, the reply of a GET of it (by pcall), as
-- rw_decode does, for a script that may write: where W is missing
-- altogether (no token known), or a lone read hold, the read holds left
-- in R and RX are lost.
-- W kept writers out of them (see above): it was deleted or evicted
-- behind dsync's back, and a plain writer may have come and gone since,
-- which nothing could tell them afterwards. Each is told at its next
-- renewal, which finds its hold gone. So is every other owner's read
-- hold beside a live write hold, which excludes them (only its own owner's
-- read hold, a downgrade, may be there): W was deleted or evicted and a
-- plain writer took it. They are dropped at once, so that a writer queued
-- behind that one is not held up by them, and their holders are told at
-- their next renewal or release.
local function rw_load(v)
  local s = rw_decode(v)
  -- Keys of another type are left for the scripts to report, before they
  -- write anything; R may be gone (evicted) with W.
  local rt = s.kind == 'write' and redis.call('TYPE', R).ok
  if (rt == 'hash' or rt == 'none') and redis.call('TYPE', RX).ok == 'zset' then
    for _, o in ipairs(redis.call('ZRANGE', RX, 0, -1)) do
      if o ~= s.owner then
        redis.call('ZREM', RX, o)
        redis.call('HDEL', R, o)
      end
    end
  end
  if (s.kind == 'missing' and not s.token or s.kind == 'read') and redis.call('EXISTS', R, RX) > 0 then
    -- A lone read hold is all there is (see above): what R and RX hold
    -- beside it was lost with a W deleted or evicted before it was taken,
    -- and must not come back to life when it is unfolded into them (see
    -- rw_unfold), a plain writer having perhaps come and gone between.
    -- Keys of another type are not dsync's to delete: the scripts report
    -- them where they read them.
    if redis.call('TYPE', R).ok == 'hash' then
      redis.call('DEL', R)
    end
    if redis.call('TYPE', RX).ok == 'zset' then
      redis.call('DEL', RX)
    end
  end
  return s
end

-- lone_read_value returns W's value for the lone read hold s, in the full
-- form: a plain one draws its token then.
local function lone_read_value(s)
  if not s.token then
    s.token = draw(nil)
  end
  s.plain = nil
  return s.token .. ' r ' .. string.format('%d', s.count) .. ' ' .. s.owner .. ' ' .. s.id .. ' ' .. s.ops
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

-- rw_unfold moves the lone read hold s (kind 'read', W's state) to R and
-- RX, expiring when W would have, and makes W "<token> shared", outliving
-- it (see rw_outlive): for a script that adds a waiter or another read
-- hold. It reads R and RX first, so that a key of the wrong type fails it
-- before any write.
local function rw_unfold(s, now_ms)
  redis.call('ZRANGE', RX, 0, 0)
  redis.call('HLEN', R)
  if not s.token then
    s.token = draw(nil)
  end
  local pt = redis.call('PTTL', W)
  if pt > 0 then
    store_reader(s.owner, s, now_ms + pt, now_ms)
  end
  redis.call('SET', W, s.token .. ' shared', 'KEEPTTL')
  rw_outlive(W, pt)
  return {kind = 'shared', token = s.token}
end

-- rw_vacate ends the hold that W holds, write or lone read hold of token
-- token, before the lock is passed on: W becomes "<token> shared" for as
-- long as it had left, so that a script failing later (a key of the wrong
-- type) leaves no hold behind, and the others look at the other keys. A
-- plain hold, whose token is nil, draws one. It returns the token.
local function rw_vacate(token)
  token = token or draw(nil)
  redis.call('SET', W, token .. ' shared', 'KEEPTTL')
  return token
end

-- rw_busy reports whether a read hold or a waiter is left at now_ms, the
-- expired ones dropped.
local function rw_busy(now_ms)
  purge_readers(now_ms)
  redis.call('ZREMRANGEBYSCORE', RW, '-inf', now_ms)
  return redis.call('EXISTS', RX) == 1 or redis.call('EXISTS', RW) == 1 or head(WQ, WX, now_ms) ~= false
end

-- rw_settle writes W for a lock whose write hold is free, with token the
-- last token handed out (nil if W did not know it): "<token> shared",
-- expiring turn_margin ms after the longest-lived of the other keys (see
-- rw_outlive: their expiries, like W's, count from the start of the
-- script that set them, their entries' from its TIME), while a read hold
-- or a waiter is left; else it deletes W. A shared lock whose token was
-- lost draws one (see fence.lua). It returns the token, '0' if none.
local function rw_settle(token, now_ms, now_us)
  if rw_busy(now_ms) then
    token = token or draw(nil, now_us)
    local ttl = math.max(redis.call('PTTL', RX), redis.call('PTTL', WX), redis.call('PTTL', RW), 1)
    redis.call('SET', W, token .. ' shared', 'PX', ttl + turn_margin)
  else
    redis.call('DEL', W)
  end
  return token or '0'
end

-- rw_keep makes W, whose state s was read in this script (no lone read
-- hold), outlive a read hold or waiter's entry just written to expire ttl
-- ms from now: a write hold records its end and its key lives at least
-- that long and turn_margin more (see keep_turn in exclusive.lua), W in
-- the shared form lives as long and turn_margin more (see rw_outlive),
-- and a missing one is written back (see rw_settle). It returns the last
-- token, '0' if none.
local function rw_keep(s, ttl, now_ms, now_us)
  if s.kind == 'write' then
    keep_turn(W, s, ttl, now_ms)
    return s.token
  end
  if s.kind == 'shared' then
    rw_outlive(W, ttl)
    return s.token
  end
  return rw_settle(s.token, now_ms, now_us)
end

-- announce appends to out the waiter of entry w, handed the grant (the
-- token; '' for a wake-up without one) and now held by owner, and wakes it
-- unless it is in the caller's hub (see hand_to).
local function announce(out, a, w, token, owner)
  local address, grant, o = hand_to(a, w, token, owner)
  out[#out + 1] = address
  out[#out + 1] = grant
  out[#out + 1] = o
end

-- pass_on hands the lock, whose write hold is free (W still holds a
-- write hold that ended, or the shared form), to whom it is due, and
-- appends each waiter it handed it to (see announce) to out:
--
--   - every waiting reader at once, if readers wait and the lock was just
--     freed of a write hold (after_write), or no writer waits, or readers
--     are preferred (prefer 'r'): readers that waited out a write go
--     before the next writer, so neither side starves;
--   - else, once no read hold is left, the writer at the head of the
--     queue.
--
-- a is the header (see codec.lua), with prefer, the preference ('r' if
-- readers are preferred), and last, the last token handed out (nil if
-- unknown). It returns the last token
-- handed out now, and whether W now holds a writer's hold; if not, the
-- caller settles W (see rw_settle).
local function pass_on(out, after_write, a, now_ms, now_us)
  purge_readers(now_ms)
  local h = head(WQ, WX, now_ms)
  local token = a.last
  if (after_write or not h or a.prefer == 'r') and redis.call('EXISTS', RW) == 1 then
    -- The read holds' hash is read first: one of the wrong type fails the
    -- script before a waiter leaves the set for a hold it cannot be
    -- given (an acquire script, see readers_due, has written nothing
    -- yet).
    redis.call('HLEN', R)
    local handed = false
    local w = pop_waiter(RW)
    while w do
      local op, owner, ttl = parse_entry(w)
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
          announce(out, a, w, '', owner)
        else
          token = draw(token, now_us)
          store_reader(owner, {token = token, count = 1, id = op, ops = op}, now_ms + tonumber(ttl), now_ms)
          announce(out, a, w, token, owner)
        end
        handed = true
      end
      w = pop_waiter(RW)
    end
    if handed then
      return token, false
    end
  end
  if not h or redis.call('EXISTS', RX) == 1 then
    return token, false
  end
  dequeue(WQ, WX, h)
  local op, owner, ttl = parse_entry(h)
  while not op do -- not a waiter's entry: skip it
    h = head(WQ, WX, now_ms)
    if not h then
      return token, false
    end
    dequeue(WQ, WX, h)
    op, owner, ttl = parse_entry(h)
  end
  token = draw(token, now_us)
  -- More waiters may be left: the release looks again, and W outlives
  -- them.
  store_turn(W, {token = token, count = 1, owner = owner, id = op, ops = op}, ttl, rw_turn, now_ms)
  announce(out, a, h, token, owner)
  return token, true
end

-- pass_and_settle passes the lock on (see pass_on) and settles W unless a
-- writer was handed it.
local function pass_and_settle(out, after_write, a, now_ms, now_us)
  local token, writer = pass_on(out, after_write, a, now_ms, now_us)
  if not writer then
    rw_settle(token, now_ms, now_us)
  end
end

-- readers_due passes the lock on as the release of the write hold would
-- have (see pass_on) when s, W's state, is a write hold that ran out
-- (ended, see decode in codec.lua) with readers waiting: readers that
-- waited out a write go before the next writer whether the write hold was
-- released or ran out. A script that finds it so does the release's part
-- first. The waiters handed the lock are woken by PUBLISH whatever their
-- hub, since the caller's reply does not name them. It returns W's state
-- afterwards.
local function readers_due(a, s, now_ms, now_us)
  if not s.ended then
    return s
  end
  redis.call('ZREMRANGEBYSCORE', RW, '-inf', now_ms)
  if redis.call('EXISTS', RW) == 0 then
    return s
  end
  a.publish_all, a.prefer, a.last = true, ARGV[12], s.token
  pass_and_settle({}, true, a, now_ms, now_us)
  a.publish_all = nil
  return rw_decode(redis.call('GET', W))
end
