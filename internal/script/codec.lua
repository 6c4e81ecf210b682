-- The codec: the one place where the formats that dsync's scripts share are
-- written and read. Its Go half is package internal/codec; a change to a
-- format touches these two files.
--
-- The argument header. Every script that acts for an owner (acquire,
-- abandon, release, token, force) takes the same ARGV, which the lock
-- core fills in (codec.Header):
--
--   ARGV[1]   owner id
--   ARGV[2]   operation id: the acquisition's, the same on every retry of
--             it, or the release's
--   ARGV[3]   hold id: of the hold to release ('' in an attempt, whose
--             hold, if it starts one, has the operation's id)
--   ARGV[4]   the hold's plain value: what a plain acquisition stores at
--             the main key (see the exclusive hold, below)
--   ARGV[5]   lease ms: what an attempt asks for; what a partial release
--             restores ('0': nothing)
--   ARGV[6]   the primitive's wake channel base
--   ARGV[7]   the caller's hub id: the caller wakes its own hub's waiters
--             from the reply, and a script publishes to the others only
--   ARGV[8]   waiter entry ('' for none)
--   ARGV[9]   waiter entry ttl ms
--   ARGV[10]  '1' if an earlier attempt registered the waiter, else '0'
--   ARGV[11]  fence ttl ms: how long the primitive's fence key, the last
--             of KEYS, keeps the last token drawn (see draw in fence.lua);
--             '0' if it keeps none
--   ARGV[12...] the primitive's own
--
-- A fast path, which runs before the library is defined, reads ARGV by
-- these positions and compares or stores ARGV[4] as it is: it never spells
-- a format out.

-- header returns the header as a table. A primitive that keeps its
-- waiters' turn sets its field turn (see exclusive.lua).
local function header()
  return {owner = ARGV[1], op = ARGV[2], id = ARGV[3], plain = ARGV[4], lease = ARGV[5], channel = ARGV[6],
    hub = ARGV[7], entry = ARGV[8], entry_ttl = ARGV[9], registered = ARGV[10] == '1', fence_ttl = ARGV[11]}
end

-- The waiter entry, what a waiter registers under:
--
--   "<hub id>/<waiter id>|<field>|...|<owner id>"
--
-- The address ("<hub id>/<waiter id>", see package hub) first, the owner
-- last; the waiter id is the acquisition's operation id, which a hold
-- handed to the waiter counts as. The fields between say what the waiter
-- asks for: the lease of a hold handed to it ("<ttl ms>"), and before it
-- a semaphore's permits ("<n>|<ttl ms>").

-- parse_entry returns the operation id, the owner and the fields of entry
-- w (at most two, as numbers), or nil if w is not a waiter's entry.
local function parse_entry(w)
  local op, fields, owner = string.match(w, '^[^/|]+/([^|]+)|(.*)|([^|]*)$')
  if not op then
    return nil
  end
  local f1, f2 = string.match(fields, '^(%d+)|(%d+)$')
  if not f1 then
    f1 = string.match(fields, '^(%d+)$')
    if not f1 then
      return nil
    end
  end
  return op, owner, tonumber(f1), tonumber(f2)
end

-- entry_owner returns the owner id of entry w.
local function entry_owner(w)
  return string.match(w, '|([^|]*)$') or ''
end

-- entry_address returns the address entry w starts with.
local function entry_address(w)
  return string.match(w, '^[^|]+')
end

-- local_to reports whether the waiter of entry w belongs to the hub with
-- the given id.
local function local_to(w, hub)
  return string.sub(w, 1, #hub + 1) == hub .. '/'
end

-- The grant, what a wake-up that hands something over carries after the
-- waiter id: "<fencing token>" of what was handed, in decimal, followed by
-- whatever else the primitive tells (" <permits>"). A wake-up is
-- published on the waiter's process channel, "<channel base>/<hub id>",
-- as "<waiter id>" or "<waiter id> <grant>".

-- wake publishes a wake-up for the waiter of entry w, with grant unless
-- nil.
local function wake(channel_base, w, grant)
  local hub, id = string.match(w, '^([^/|]+)/([^|]+)')
  if hub then
    if grant then
      id = id .. ' ' .. grant
    end
    redis.call('PUBLISH', channel_base .. '/' .. hub, id)
  end
end

-- hand_to returns what a reply says of a waiter handed something, for the
-- caller of the script to wake it if it is in the caller's hub (a.hub, see
-- the header), and publishes the wake-up on a.channel to any other: the
-- waiter's address, the grant and the owner that now holds. A wake-up
-- without a grant (a release that freed the primitive and wakes the
-- waiter to try) has grant '' and owner ''. With w nil it returns nothing.
-- A script whose reply cannot name the waiter (an acquisition's) sets
-- a.publish_all, and every waiter is woken by PUBLISH.
local function hand_to(a, w, grant, owner)
  if not w then
    return
  end
  if a.publish_all or not local_to(w, a.hub) then
    if grant == '' then
      wake(a.channel, w)
    else
      wake(a.channel, w, grant)
    end
  end
  return entry_address(w), grant, owner
end

-- The replies.
--
-- An attempt replies 0 when it took a plain hold (its token not drawn
-- yet), a positive token when it took a new hold with that token, and
-- otherwise
--
--   {1, hold count, token ('0' if not drawn yet), hold id, remaining ms}
--       held by the owner: a re-entry, a retry, a hold handed to it
--   {0, remaining ms of the current hold (-1 if unknown or none),
--       the current or last token ('0' if none is known)}
--       not acquired
--
-- A script that may hand the primitive to waiters (release, abandon,
-- force) replies a bare integer n when it handed nothing, or
--
--   {n, hold id, address, grant, owner, address, grant, owner, ...}
--
-- with one triple per waiter it handed the primitive to or woke (see
-- hand_to). What n and the hold id mean is the script's to say.

-- not_acquired returns the reply of an attempt that did not acquire.
local function not_acquired(left, token)
  return {0, left, token or '0'}
end

-- The exclusive hold (mutex, fairlock, the election's term, the read-write
-- lock's write side) is one string at the primitive's main key, so that
-- taking or freeing it is one command with its expiry. The key is
--
--   missing
--       free, and no waiter registered when it was freed; for a primitive
--       that keeps its waiters' turn (fairlock, the read-write lock, see
--       keep_turn in exclusive.lua), no live waiter registered at all
--   "<owner id> <hold id>"
--       the plain form: a hold taken by one SET NX (its count 1, its
--       fencing token not drawn yet, nobody registered behind it); ARGV[4]
--       of the header, made by codec.PlainValue (the read-write lock's
--       read hold has a plain form of its own, see rwlock/lua/rw.lua)
--   "<owner id> <hold id> <lease ms> <fence ttl ms> =<value>"
--       the plain form of an election's term, taken by a plain campaign
--       (codec.TermValue): the lease it was set with and the election's
--       fence ttl, which its first read needs (see convert in
--       election/lua/term.lua), and the candidate's value, the rest of
--       the string, whatever it holds
--   "<token> <count> <waiting> <owner id> <hold id> <ops>"
--       the full form: token, the fencing token (see fence.lua); count,
--       the owner's hold count; ops, the recent operation ids (see seen);
--       waiting, one of
--         0         no waiter registered behind the hold, which spares its
--                   release a look at the waiters; the key expires with
--                   the hold
--         1         waiters may be registered; the key expires with the
--                   hold
--         <end ms>  the end form: waiters may be registered, and the hold
--                   ends at that server time (ms), while the key lives on
--                   as long as its waiters need it (see keep_turn in
--                   exclusive.lua); past its end the hold is gone and the
--                   key reads as free, with the hold's token as the last
--   "<token> free"
--       free, with waiters registered, woken to try (see pass_on in
--       exclusive.lua); token is the last one handed out
--
-- Anything else there was not written by dsync, and is left alone.

-- decode reads the state at lock from v, the reply of a GET of it (by
-- pcall): a table with owner, id, count, waiting, ops, ends (the end, in
-- the end form) and, once drawn, token (a string) while held (plain set
-- for the plain form, and term, a table of lease, fence_ttl and value, for
-- a term's); with token alone while free, and ended set too
-- for a hold in the end form past its end; empty when the key is
-- missing; with foreign set when the key holds something else (see
-- unexpected).
local function decode(lock, v)
  if type(v) == 'table' then
    return {foreign = v.err}
  end
  if not v then
    return {}
  end
  local token, count, waiting, owner, id, ops = string.match(v, '^(%d+) (%d+) (%d+) (%S+) (%S+) ?(.*)$')
  if token then
    local ends = tonumber(waiting)
    if ends <= 1 then
      return {token = token, count = tonumber(count), waiting = ends == 1, owner = owner, id = id, ops = ops}
    end
    if ends <= now() then
      return {token = token, ended = true}
    end
    return {token = token, count = tonumber(count), waiting = true, ends = ends, owner = owner, id = id, ops = ops}
  end
  token = string.match(v, '^(%d+) free$')
  if token then
    return {token = token}
  end
  owner, id = string.match(v, '^(%x+) (%x+)$')
  if owner then
    return {count = 1, waiting = false, owner = owner, id = id, ops = id, plain = true}
  end
  local lease, fence_ttl, value
  owner, id, lease, fence_ttl, value = string.match(v, '^(%x+) (%x+) (%d+) (%d+) =(.*)$')
  if owner then
    return {count = 1, waiting = false, owner = owner, id = id, ops = id, plain = true,
      term = {lease = tonumber(lease), fence_ttl = tonumber(fence_ttl), value = value}}
  end
  -- Releases before the free marker left the bare token, always with an
  -- expiry; a bare number without one is someone else's.
  if string.match(v, '^%d+$') and redis.call('PTTL', lock) > 0 then
    return {token = v}
  end
  return {foreign = 'not a dsync state'}
end

-- load reads the state at lock (see decode).
local function load(lock)
  return decode(lock, redis.pcall('GET', lock))
end

-- hold_left returns the ms left of the held state s at lock: until its end
-- in the end form, else the key's PTTL. A hold that decode found held ends
-- after the script's one instant (see now): 1 ms left at least.
local function hold_left(lock, s)
  if s.ends then
    return math.max(s.ends - now(), 1)
  end
  return redis.call('PTTL', lock)
end

-- acquired returns the reply of an attempt that holds the exclusive hold
-- s at lock.
local function acquired(lock, s)
  return {1, s.count, s.token or '0', s.id, hold_left(lock, s)}
end

-- encode returns the full form of the held state s; a plain hold draws its
-- token then.
local function encode(s)
  s.plain = nil
  if not s.token then
    s.token = draw(nil)
  end
  local waiting = s.waiting and '1' or '0'
  if s.ends then
    waiting = string.format('%d', s.ends)
  end
  return s.token .. ' ' .. string.format('%d', s.count) .. ' ' .. waiting .. ' ' .. s.owner .. ' ' .. s.id .. ' ' .. s.ops
end

-- store writes the full form of the held state s, its hold lasting ttl ms
-- from now, or keeping its expiry (its end) if ttl is nil; a plain hold
-- draws its token then. In the end form the key's expiry is only ever
-- pushed back: it outlives the hold, for the waiters' sake.
local function store(lock, s, ttl)
  if not ttl then
    redis.call('SET', lock, encode(s), 'KEEPTTL')
  elseif s.ends then
    s.ends = now() + tonumber(ttl)
    redis.call('SET', lock, encode(s), 'KEEPTTL')
    expire_at_least(lock, ttl)
  else
    redis.call('SET', lock, encode(s), 'PX', ttl)
  end
end

-- store_extending writes s like store, with its hold lasting ttl ms from
-- now unless it already lasts longer: a re-entry or partial release
-- through a handle with a shorter lease must not cut short a hold that
-- its owner keeps alive on a longer one.
local function store_extending(lock, s, ttl)
  if tonumber(ttl) > hold_left(lock, s) then
    store(lock, s, ttl)
  else
    store(lock, s)
  end
end

-- extend makes the hold s at lock last ttl ms from now unless it already
-- lasts longer, as store_extending does without writing s otherwise; a
-- ttl of 0 changes nothing.
local function extend(lock, s, ttl)
  if not s.ends then
    expire_at_least(lock, ttl)
  elseif tonumber(ttl) > hold_left(lock, s) then
    store(lock, s, ttl)
  end
end

-- mark_free leaves lock free, the last token handed out being token, for
-- ttl ms: with waiters registered, woken to take it (see pass_on in
-- exclusive.lua), or as the election keeps its last token.
local function mark_free(lock, token, ttl)
  redis.call('SET', lock, token .. ' free', 'PX', ttl)
end
