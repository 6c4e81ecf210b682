-- What an exclusive hold does (mutex, fairlock, the election's term): its
-- acquisition, re-entry, release, hand-off and renewal, over the state
-- that codec.lua writes and reads, and a FIFO queue of waiters (queue.lua).
--
-- Keeping the waiters' turn. A primitive that promises its waiters their
-- turn (fairlock) sets a.turn, in the header table a (see header in
-- codec.lua), to its expiry key, the sorted set of its waiters' expiries,
-- or to a list of such keys (the read-write lock: its waiting writers',
-- its waiting readers' and its read holds' expiries, whatever is behind
-- its write hold): then its main key exists whenever a live waiter is
-- queued, so that a plain SET NX, which takes the hold wherever the key
-- is missing, never takes it out of turn. A hold with waiters behind it is kept in the end
-- form (see codec.lua), its key living on past its end while the waiters
-- need it; every registration and heartbeat of a waiter makes the key
-- outlive its entry (see keep_turn), writing a free marker where the key
-- is missing; and every hold taken or handed on with waiters left behind
-- it is written so (see store_turn). Without a.turn (the mutex, which
-- anyone takes when free, the election), nothing here writes the end
-- form.

-- turn_margin is how many ms a main key kept for the waiters' turn
-- outlives the last waiter's entry: an entry's expiry is counted from the
-- server's TIME during the script, a key's from when the script began,
-- which may be earlier by the script's run so far.
local turn_margin = 2

-- turn_life returns how long, in ms from now_ms, the longest-lived entry
-- of turn (an expiry key, or a list of them, see a.turn) has left (0 or
-- less if none is live): one command per key, whatever the entries.
local function turn_life(turn, now_ms)
  if type(turn) ~= 'table' then
    return queue_life(turn, now_ms)
  end
  local life = 0
  for _, expiry in ipairs(turn) do
    life = math.max(life, queue_life(expiry, now_ms))
  end
  return life
end

-- store_turn writes the hold s at lock, lasting ttl ms from now_ms, so that
-- the key outlives the live waiters whose expiries are in turn: in the end
-- form while any is left, else as a hold nobody waits behind.
local function store_turn(lock, s, ttl, turn, now_ms)
  ttl = tonumber(ttl)
  local life = turn_life(turn, now_ms)
  if life <= 0 then
    s.waiting, s.ends = false, nil
    store(lock, s, ttl)
    return
  end
  s.waiting, s.ends = true, now_ms + ttl
  redis.call('SET', lock, encode(s), 'PX', math.max(ttl, life + turn_margin))
end

-- take starts the hold of the attempt a (see header) on lock, whose state
-- s is free, in the full form, for a.lease ms; waiting says whether
-- waiters may be queued behind it (whose turn a.turn keeps).
local function take(lock, s, a, waiting, now_us)
  local t = {token = draw(s.token, now_us), count = 1, waiting = waiting, owner = a.owner, id = a.op, ops = a.op}
  if a.turn and waiting then
    store_turn(lock, t, a.lease, a.turn, math.floor(now_us / 1000))
  else
    store(lock, t, a.lease)
  end
  return t
end

-- enter applies the attempt a of the owner of the hold s at lock: a
-- re-entry, a retry whose first reply was lost (its operation id is
-- seen), or the attempt of a waiter the hold was handed to. A re-entry of
-- a plain hold draws its token.
local function enter(lock, s, a)
  if s.plain and a.op == s.id then
    expire_at_least(lock, a.lease)
    return
  end
  if not seen(s.ops, a.op) then
    s.count = s.count + 1
  end
  s.ops = remember(s.ops, a.op, now_s(), acquisition_memory(a.lease))
  store_extending(lock, s, a.lease)
end

-- reenter answers the attempt a of the owner of the hold s at lock (see
-- enter), which leaves the queue if it registered.
local function reenter(lock, s, a, queue, expiry)
  enter(lock, s, a)
  if a.registered then
    dequeue(queue, expiry, a.entry)
  end
  return acquired(lock, s)
end

-- flag_waiting records in the hold s at lock that a waiter registered
-- behind it, so that its release looks at the queue; a plain hold draws
-- its token then, which the waiter is told.
local function flag_waiting(lock, s)
  if s.waiting then
    return
  end
  s.waiting = true
  store(lock, s)
end

-- keep_turn makes the key at lock, whose state s was read in this script,
-- outlive a waiter's entry that expires ttl ms after now_ms (see a.turn):
-- a hold records its end (the end form, see codec.lua) before its key's
-- expiry is pushed back; a free primitive whose key is missing gets a
-- free marker. A hold whose key has no expiry (not one dsync set)
-- outlives every entry as it is.
local function keep_turn(lock, s, ttl, now_ms)
  local life = tonumber(ttl) + turn_margin
  if s.owner and not s.ends then
    local left = redis.call('PTTL', lock)
    if left < 0 then
      flag_waiting(lock, s)
      return
    end
    s.waiting, s.ends = true, now_ms + left
    store(lock, s)
    if left < life then
      redis.call('PEXPIRE', lock, life)
    end
    return
  elseif not s.owner and not s.token then
    mark_free(lock, draw(nil), life)
    return
  end
  expire_at_least(lock, life)
end

-- leave_turn cuts the life of the key at lock, whose hold s (held by
-- someone else) is in the end form, back to what the hold and the live
-- waiters still queued need, once a waiter left the queue of turn (see
-- a.turn) without taking the hold: the key was kept for that waiter, and
-- outliving an ended hold with nobody queued would keep the primitive's
-- key past its being free.
local function leave_turn(lock, s, turn)
  if s.owner and s.ends then
    local now_ms = now()
    -- The hold was read live at the script's one instant (see now): 1 ms
    -- left at least, as an expiry must be.
    store_turn(lock, s, math.max(s.ends - now_ms, 1), turn, now_ms)
  end
end

-- queue_behind registers the waiter of the attempt a (if it has an entry)
-- behind the hold s at lock, or behind the head of a free primitive, and
-- returns the failed attempt's reply.
local function queue_behind(lock, s, a, queue, expiry, now_ms)
  if a.entry ~= '' then
    enqueue(queue, expiry, a.entry, now_ms, a.entry_ttl, not a.registered)
    if a.turn then
      keep_turn(lock, s, a.entry_ttl, now_ms)
    elseif s.owner then
      flag_waiting(lock, s)
    end
  end
  if not s.owner then
    return not_acquired(-1, s.token)
  end
  return not_acquired(hold_left(lock, s), s.token)
end

-- A mutex's head waiter woken to try (see pass_on) keeps its place with
-- its queue score replaced by minus the server time in ms it was woken
-- at: below every arrival's, so that it stays first, and telling how long
-- ago the wake-up was.

-- short_window is how many hand-off thresholds a woken head lets holds
-- shorter than the threshold pass before a release hands it the mutex
-- (see pass_on); the mutex package counts the same (shortWindow) for the
-- release that looks at the queue unasked (see release.lua).
local short_window = 3

-- woken_for returns how many ms ago the head whose queue score is since
-- was woken to try, or nil if it was not.
local function woken_for(since, now_ms)
  if since < 0 then
    return now_ms + since
  end
end

-- mark_woken records that the head w was woken at now_ms.
local function mark_woken(queue, w, now_ms)
  redis.call('ZADD', queue, 'XX', -now_ms, w)
end

-- pass_on frees the exclusive hold s at lock (or the free primitive, s
-- without an owner) and passes it to the live waiter at the head of
-- queue, if any, in one of two modes:
--
--   hand-off   the head's hold begins here, with the next token, for the
--              lease its entry asks (with its end recorded while waiters
--              are left behind it, if a.turn keeps their turn), and its
--              wake-up carries the grant;
--   wake-up    the primitive is left free and the head is woken to try:
--              whoever reaches the server first takes it. With after
--              (the mutex's threshold in ms; nil or 0 hands off always),
--              a head not woken yet is woken while it has waited less
--              than after ms since it queued, the primitive left with a
--              marker (see codec.lua) that keeps plain acquisitions out
--              and the last token in, for the waiters' entry ttl
--              (a.entry_ttl). A release of a hold shorter than after
--              (a.short) instead deletes the key, so that the releaser's
--              next plain SET NX takes the mutex again, and wakes a head
--              not woken yet whatever its wait; the head woken, later
--              such releases wake nobody, until short_window thresholds
--              after its wake-up, when one hands it the mutex. Not a head
--              of the caller's own hub (a.hub), which is handed off: the
--              caller wakes it in its process, where a hand-off costs no
--              trip and a wake-up would cost the head an attempt.
--
-- Without a live waiter the key is deleted, or left with only the last
-- token for fence_ttl ms if given. A hold that no waiter registered behind
-- (waiting false) is freed without a look at the queue. It returns the
-- head's entry, the grant ('' for a wake-up) and the owner that now holds,
-- or nothing (see hand_to).
local function pass_on(lock, s, queue, expiry, a, after, fence_ttl)
  if not (s.owner and not s.waiting) then
    local now_ms, now_us = now()
    local w, since = head(queue, expiry, now_ms)
    while w do
      local op, owner, ttl = parse_entry(w)
      if op then
        if after and after > 0 and not local_to(w, a.hub) then
          local woken = woken_for(since, now_ms)
          if a.short then
            if not woken then
              redis.call('DEL', lock)
              mark_woken(queue, w, now_ms)
              return w, '', ''
            elseif woken < short_window * after then
              redis.call('DEL', lock)
              return
            end
          elseif not woken and now_ms - math.floor(since) < after then
            mark_free(lock, s.token or draw(nil, now_us), a.entry_ttl)
            mark_woken(queue, w, now_ms)
            return w, '', ''
          end
        end
        dequeue(queue, expiry, w)
        local token = draw(s.token, now_us)
        -- More waiters may be left: the next release looks again.
        local t = {token = token, count = 1, waiting = true, owner = owner, id = op, ops = op}
        if a.turn then
          store_turn(lock, t, ttl, a.turn, now_ms)
        else
          store(lock, t, ttl)
        end
        return w, token, owner
      end
      dequeue(queue, expiry, w) -- not a waiter's entry: drop it
      w, since = head(queue, expiry, now_ms)
    end
  end
  if fence_ttl and s.token then
    mark_free(lock, s.token, fence_ttl)
  else
    redis.call('DEL', lock)
  end
end

-- renew_holds extends many holds in one call (the lease scheduler's
-- batch): KEYS holds one main key per hold, ARGV[1] = keys per hold (1),
-- ARGV[2] = args per hold, then per hold its owner id, lease ms (0: only
-- check the hold, as for a fixed lease) and hold id. It replies per hold 1
-- if that very hold (owner and hold id) is still there and now expires no
-- sooner than its lease, else 0: a hold in the end form is there until its
-- end, whatever its key's expiry. A key that is not a dsync state costs
-- only its own hold.
local function renew_holds()
  local out, per = {}, tonumber(ARGV[2])
  for i = 1, #KEYS do
    local base = 2 + (i - 1) * per
    local s = load(KEYS[i])
    if s.owner == ARGV[base + 1] and s.id == ARGV[base + 3] then
      -- Never shorten a hold that a re-entry through a handle with a
      -- longer lease extended: the client counts on no script doing so.
      extend(KEYS[i], s, ARGV[base + 2])
      out[i] = 1
    else
      out[i] = 0
    end
  end
  return out
end
