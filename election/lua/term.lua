-- The election's state besides the term itself, which is an exclusive
-- hold at the main key (exclusive.lua), and the queue of candidates
-- (queue.lua):
--
--   values   hash: a queued candidate's entry -> the value it campaigns
--            with, which becomes the leader's value when the term is
--            handed to it; an entry leaves it when it leaves the queue
--   leader   string, the leader state:
--
--              "<rev> <id> <token> <began> <value>"
--
--            rev, the number of the latest change announced to
--            observers; and of the term announced last: id (its hold id,
--            '' once its end is announced), token ('' if unknown), began
--            (the server's time in ms, 0 if unknown) and value, the rest
--            of the string, whatever it holds. One SET writes it with its
--            expiry, one GET reads it. A term taken by a plain campaign
--            has none until it is converted (see convert).
--
-- The leader state is also the election's fence (see fence.lua): its
-- token is the last one handed out, which seeds the next when the main key
-- is gone (the last term ended with nobody queued, whose release deletes
-- the key, or ran out, or the key was deleted). It outlives every term by
-- the fence ttl, so a leader state that is gone while a term is on was
-- deleted behind the election's back: reads then report the term with an
-- empty value.
--
-- The main key exists whenever a live candidate is queued (a.turn, see
-- exclusive.lua): where it is missing nobody is queued, and a plain
-- campaign (acquire.lua's fast path, or Campaign's own SET NX) takes the
-- term with one SET NX.
--
-- Every change that observers can tell apart (a term begins, its value
-- changes, the election lapses) bumps rev and is published on the observe
-- channel as
--
--   "<rev> <lapsed 0|1> <token> <began ms> <ttl ms> <value>"
--
-- which is also the head of what a read replies (see read_leader).
-- Observers order states by rev, then lapsed: the lapse of a term that
-- ran out with nobody to announce it, which a read finds, comes after the
-- term at the same rev. A missing rev is seeded from the server clock in
-- µs, as a token is, so that it keeps growing across a deleted leader
-- state; a read reports the clock then, and a write one more.

-- leader_state returns the leader state at leader as a table: rev (a
-- number, or nil), id (false if none), token (a string, or nil), began
-- (ms) and value; or nil and an error reply if the key holds something
-- else. A hash there is the leader state as versions before the string
-- wrote it, read so that its rev and token carry on; the next write
-- replaces it.
local function leader_state(leader)
  local v = redis.pcall('GET', leader)
  if type(v) == 'table' then
    if string.find(tostring(v.err), 'WRONGTYPE', 1, true) then
      local h = redis.pcall('HMGET', leader, 'rev', 'id', 'token', 'began', 'value')
      if not h.err and tonumber(h[1]) then
        return {rev = tonumber(h[1]), id = h[2] or '', token = tonumber(h[3]) and h[3] or nil,
          began = tonumber(h[4]) or 0, value = h[5] or ''}
      end
    end
    return nil, unexpected(leader, v.err)
  end
  if not v then
    return {id = false, began = 0, value = ''}
  end
  local rev, id, token, began, value = string.match(v, '^(%d+) (%S*) (%d*) (%d+) (.*)$')
  if not rev then
    return nil, unexpected(leader, 'not a leader state')
  end
  if token == '' then
    token = nil
  end
  return {rev = tonumber(rev), id = id, token = token, began = tonumber(began), value = value}
end

-- leader_rev returns the leader state's rev (a number, or nil), the id of
-- the term announced last ('' if its end was announced, false if none),
-- the last token (a string, or nil), an error reply if the key holds
-- something else, and the whole state (see leader_state).
local function leader_rev(leader)
  local st, err = leader_state(leader)
  if not st then
    return nil, false, nil, err
  end
  return st.rev, st.id, st.token, nil, st
end

-- store_leader writes the leader state, living ttl ms.
local function store_leader(leader, rev, id, token, began, value, ttl)
  redis.call('SET', leader, string.format('%d %s %s %d ', rev, id, token or '', began) .. value, 'PX', ttl)
end

-- bump returns the rev that follows rev, seeded from the clock if nil
-- as a token is (see next_token: two seeds in one script call differ).
local function bump(rev)
  if rev then
    return rev + 1
  end
  return tonumber(next_token(nil, nil)) + 1
end

-- publish_state tells observers of a state.
local function publish_state(channel, rev, lapsed, token, began, ttl, value)
  redis.call('PUBLISH', channel, string.format('%d %d %s %d %d ', rev, lapsed, token, began, ttl) .. value)
end

-- begin_term records and announces the term with hold id id and the
-- given token and value, begun at the server time began (ms, 0 if
-- unknown), whose hold expires in ttl ms; the leader state lives at least
-- keep ms more. It returns the new rev.
local function begin_term(leader, channel, rev, id, token, value, began, ttl, keep)
  rev = bump(rev)
  -- Past the term (ttl is its lease), and the fence ttl from now.
  store_leader(leader, rev, id, token, began, value, math.max(tonumber(ttl), tonumber(keep)))
  publish_state(channel, rev, 0, token, began, ttl, value)
  return rev
end

-- announce_lapse records and announces that no term is on, the last
-- token being token (nil if unknown); the leader state lives keep ms
-- more.
local function announce_lapse(leader, channel, rev, token, keep)
  rev = bump(rev)
  store_leader(leader, rev, '', token, 0, '', keep)
  publish_state(channel, rev, 1, token or '0', 0, 0, '')
end

-- A term taken by a plain campaign (one SET NX of its plain form, see
-- codec.lua, with the hint "term" published on the observe channel in the
-- same round trip) has no token and no leader state yet: nothing but the
-- hint tells observers of it, and the hint makes them read. The first
-- script that finds it, a read among them, converts it (see convert), so
-- that every read reports it alike; a term that ends before anything read
-- it (its Resign is then a GET and a DEL) was never seen, and draws no
-- token.

-- convert turns the plain term s at lock into the full form: it draws its
-- token, which follows the leader state's (the fence), and records the
-- term in the leader state with its value and the time it began, which
-- its expiry still tells (only convert extends a plain term: a renewal
-- converts it first). With channel, it tells observers of it too. It
-- returns nothing, or an error reply for a leader state dsync did not
-- write; a state s that is not a plain term is left as it is.
local function convert(lock, leader, s, channel)
  local term = s.term
  if not term then
    return
  end
  local rev, _, last, err = leader_rev(leader)
  if err then
    return err
  end
  local now_ms, now_us = now()
  local ttl = redis.call('PTTL', lock)
  local began = 0
  if ttl > 0 then
    began = now_ms - math.max(term.lease - ttl, 0)
  end
  -- Not draw: a read's or a renewal's ARGV has no header.
  s.token = next_token(last, nil, now_us)
  s.term = nil
  store(lock, s)
  if channel then
    begin_term(leader, channel, rev, s.id, s.token, term.value, began, ttl, term.fence_ttl)
  else
    store_leader(leader, bump(rev), s.id, s.token, began, term.value, math.max(ttl, term.fence_ttl))
  end
end

-- read_leader returns the election's observable state: {rev, lapsed,
-- token, began ms, ttl ms, value, holder's owner id, hold id}, the token
-- being the last one when lapsed ('0' if none is known); or nil and an
-- error reply for a key that dsync did not write. It converts a plain
-- term (see convert).
local function read_leader(lock, leader)
  local s = load(lock)
  if s.foreign then
    return nil, unexpected(lock, s.foreign)
  end
  local st, err
  err = convert(lock, leader, s)
  if err then
    return nil, err
  end
  st, err = leader_state(leader)
  if not st then
    return nil, err
  end
  local rev = st.rev
  if not rev then
    local _, now_us = now()
    rev = now_us
  end
  rev = string.format('%d', rev)
  if not s.owner then
    return {rev, 1, s.token or st.token or '0', 0, 0, '', '', ''}
  end
  local ttl = hold_left(lock, s)
  if st.id == s.id then
    return {rev, 0, s.token, st.began, ttl, st.value, s.owner, s.id}
  end
  return {rev, 0, s.token, 0, ttl, '', s.owner, s.id}
end

-- pass_on hands the election on from state s, whose term ends or which
-- is free, to the next live candidate (see pass_on in exclusive.lua),
-- announcing the new term with the value the candidate queued with; if
-- nobody is queued and ended is true (a term was on), it announces the
-- lapse. k holds the keys (see election_keys); a is the header (see
-- codec.lua), with fence_ttl and observe, the observe channel; rev and
-- token are the leader state's (see leader_rev). With a.turn (the expiry
-- key), a term handed on with candidates left behind it keeps their turn
-- (see exclusive.lua). With nobody queued the main key is deleted: the
-- leader state keeps the last token, so that the next campaign finds the
-- key missing and takes the fast path (see acquire.lua). It returns what
-- hand_to does.
local function term_pass_on(k, a, s, rev, token, ended)
  -- The leader state is the fence: the next token follows its own when
  -- the main key is gone.
  s.token = s.token or token
  local w, granted, owner = pass_on(k.lock, s, k.queue, k.expiry, a, nil, nil)
  if w then
    local id, _, ttl = parse_entry(w)
    local value = redis.pcall('HGET', k.values, w)
    if type(value) ~= 'string' then
      value = ''
    end
    redis.pcall('HDEL', k.values, w)
    begin_term(k.leader, a.observe, rev, id, granted, value, now(), ttl, a.fence_ttl)
    return hand_to(a, w, granted, owner)
  end
  if ended then
    announce_lapse(k.leader, a.observe, rev, s.token, a.fence_ttl)
  end
end

-- prune_values drops the values of candidates no longer queued (their
-- waiters died and were purged from the queue) once they outnumber the
-- queue by slack: a few commands per enqueue, and a scan now and then.
local function prune_values(values, queue, slack)
  local n = redis.pcall('HLEN', values)
  if type(n) ~= 'number' or n <= redis.call('ZCARD', queue) + slack then
    return
  end
  for _, e in ipairs(redis.call('HKEYS', values)) do
    if not redis.call('ZSCORE', queue, e) then
      redis.call('HDEL', values, e)
    end
  end
end

-- election_keys returns the keys of a script called with the election's
-- five keys in their usual order: main key, queue, expiry, values,
-- leader.
local function election_keys()
  return {lock = KEYS[1], queue = KEYS[2], expiry = KEYS[3], values = KEYS[4], leader = KEYS[5]}
end

-- own_term loads the term of owner's hold id, converting it if it is
-- plain (telling observers on channel, if given): it returns the term's
-- state, or nil and the script's reply, an error for a key dsync did not
-- write or 0 if that very term is not on.
local function own_term(k, owner, id, channel)
  local s = load(k.lock)
  if s.foreign then
    return nil, unexpected(k.lock, s.foreign)
  end
  if s.owner ~= owner or s.id ~= id then
    return nil, 0
  end
  local err = convert(k.lock, k.leader, s, channel)
  if err then
    return nil, err
  end
  return s
end
