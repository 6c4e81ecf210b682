-- abandon: clean up after an acquisition that failed or was given up:
-- leave the queue, and undo the acquisition if its reply was lost or the
-- mutex was handed to this waiter, passing the mutex on. A mutex found
-- free is passed on too: its last hold expired, and the waiters may not
-- know yet. A head woken to try that leaves a hold it did not flag (see
-- acquire.lua) flags it, if waiters are left, for its release to pass
-- the mutex on.
-- KEYS[1] lock key (see codec.lua); KEYS[2] queue, KEYS[3] expiry (see
-- queue.lua).
-- ARGV: the header (see codec.lua) of the acquisition; ARGV[12] the
-- hand-off threshold ms.
-- Reply: {1 if an acquisition was undone, else 0; ''}, followed by the
-- waiter handed the mutex or woken (see hand_to).
local lock, queue, expiry = KEYS[1], KEYS[2], KEYS[3]
local a = header()
local woken = false
if a.entry ~= '' then
  local since = redis.call('ZSCORE', queue, a.entry)
  woken = since and woken_for(tonumber(since), now()) ~= nil
  dequeue(queue, expiry, a.entry)
end
local s = load(lock)
if s.foreign then
  return {0, ''}
end
if s.owner == a.owner and seen(s.ops, a.op) then
  if s.count > 1 then
    -- Forgetting the id keeps a retried abandon from undoing another hold.
    s.count = s.count - 1
    s.ops = forget(s.ops, a.op)
    store(lock, s)
    return {1, ''}
  end
  s.waiting = true
  return {1, '', hand_to(a, pass_on(lock, s, queue, expiry, a, tonumber(ARGV[12])))}
end
if not s.owner then
  s.waiting = true
  return {0, '', hand_to(a, pass_on(lock, s, queue, expiry, a, tonumber(ARGV[12])))}
end
if woken and not s.waiting and head(queue, expiry, now()) then
  -- A head woken to try leaves the holds it finds unflagged until it is
  -- due (see acquire.lua), counting on its own next attempt: without it,
  -- the release of this one would wake nobody, and the next head would
  -- wait for its heartbeat.
  flag_waiting(lock, s)
end
return {0, ''}
