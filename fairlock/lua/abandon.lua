-- abandon: clean up after an acquisition that failed or was given up:
-- leave the queue, and undo the acquisition if its reply was lost or the
-- lock was handed to this waiter, passing the lock on to the head. A lock
-- found free is passed on too: its last hold expired, and the head may
-- not know yet.
-- KEYS[1] lock key (see codec.lua); KEYS[2] queue, KEYS[3] expiry (see
-- queue.lua); KEYS[4] fence key (see fence.lua).
-- ARGV: the header (see codec.lua) of the acquisition.
-- Reply: {1 if an acquisition was undone, else 0; ''}, followed by the
-- waiter handed the lock (see hand_to).
local lock, queue, expiry = KEYS[1], KEYS[2], KEYS[3]
local a = header()
a.turn = expiry
if a.entry ~= '' then
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
  return {1, '', hand_to(a, pass_on(lock, s, queue, expiry, a))}
end
if not s.owner then
  s.waiting = true
  return {0, '', hand_to(a, pass_on(lock, s, queue, expiry, a))}
end
leave_turn(lock, s, expiry)
return {0, ''}
