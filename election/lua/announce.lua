-- announce: tell observers what the election's state is after a term
-- was lost: its hold vanished (deleted, flushed, lost in a failover) or
-- expired, and nobody announced the change. Announces the lapse if no
-- term is on and the end of the last one was not announced, or the leader
-- state is gone, and wakes the head of the queue to take over; announces
-- the term that is on if it never was (its leader state vanished).
-- KEYS: the election's five (see election_keys).
-- ARGV[1] observe channel; ARGV[2] fence ttl ms; ARGV[3] wake channel
-- base.
-- Reply: 1 if it announced a change, else 0.
local k = election_keys()
local s = load(k.lock)
if s.foreign then
  return unexpected(k.lock, s.foreign)
end
if s.term then
  -- A plain term: converting it tells observers of it.
  return convert(k.lock, k.leader, s, ARGV[1]) or 1
end
local rev, id, last, err = leader_rev(k.leader)
if err then
  return err
end
if s.owner then
  if id == s.id then
    return 0
  end
  begin_term(k.leader, ARGV[1], rev, s.id, s.token, '', 0, hold_left(k.lock, s), ARGV[2])
  return 1
end
local h = head(k.queue, k.expiry, now())
if h then
  wake(ARGV[3], h)
end
if rev and (id == '' or not id) then
  return 0 -- the lapse was announced
end
announce_lapse(k.leader, ARGV[1], rev, s.token or last, ARGV[2])
return 1
