-- abandon: clean up after an acquisition that failed or was given up:
-- leave the queue, and undo the acquisition if its reply was lost or the
-- lock was handed to this waiter, passing the lock on to the head. A lock
-- found free is passed on too: its last hold expired, and the head may
-- not know yet.
-- KEYS[1] lock key (see load); KEYS[2] queue, KEYS[3] expiry (see
-- queue.lua).
-- ARGV[1] owner id; ARGV[2] operation id of the acquisition; ARGV[3]
-- waiter entry ('' if it never queued); ARGV[4] wake channel base; ARGV[5]
-- the caller's process id (see hand_off).
-- Reply: {1 if an acquisition was undone, else 0; ''}, followed by the
-- waiter's address, token and owner id if the lock was handed on.
local lock, queue, expiry = KEYS[1], KEYS[2], KEYS[3]
local owner, op = ARGV[1], ARGV[2]
local pop = function() return pop_head(queue, expiry) end
if ARGV[3] ~= '' then
  dequeue(queue, expiry, ARGV[3])
end
local s = load(lock)
if s.foreign then
  return {0, ''}
end
if s.owner == owner and seen(s.ops, op) then
  if s.count > 1 then
    -- Forgetting the id keeps a retried abandon from undoing another hold.
    s.count = s.count - 1
    s.ops = forget(s.ops, op)
    store(lock, s)
    return {1, ''}
  end
  return {1, '', hand_off(lock, nil, s, ARGV[4], nil, ARGV[5], pop)}
end
if not s.owner then
  s.waiting = true
  return {0, '', hand_off(lock, nil, s, ARGV[4], nil, ARGV[5], pop)}
end
return {0, ''}
