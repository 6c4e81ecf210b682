-- abandon: clean up after an acquisition that failed or was given up:
-- leave the queue, and undo the acquisition if its reply was lost or the
-- lock was handed to this waiter, passing the lock on. A lock found free
-- of writers is passed on too: its last hold expired, and a waiter may not
-- know yet.
-- KEYS: see rw.lua.
-- ARGV: the header (see codec.lua) of the acquisition; ARGV[12] 'r' if
-- readers are preferred, else 'w'; ARGV[13] 'r' for a read acquisition,
-- 'w' for a write one.
-- Reply: {1 if an acquisition was undone, else 0; ''}, followed by each
-- waiter the lock was handed to (see hand_to).
local a = rw_header()
local role, owner, op, entry = ARGV[13], a.owner, a.op, a.entry
a.prefer = ARGV[12]
if entry ~= '' then
  if role == 'w' then
    dequeue(WQ, WX, entry)
  else
    redis.call('ZREM', RW, entry)
  end
end
local s = rw_load(redis.pcall('GET', W))
if s.foreign then
  return {0, ''}
end
a.last = s.token
local out = {0, ''}
local now_ms, now_us = now()
if role == 'w' and s.kind == 'write' and s.owner == owner and seen(s.ops, op) then
  out[1] = 1
  if s.count > 1 then
    -- Forgetting the id keeps a retried abandon from undoing another hold.
    s.count = s.count - 1
    s.ops = forget(s.ops, op)
    store(W, s)
    return out
  end
  s.token = rw_vacate(s.token)
  a.last = s.token
  pass_and_settle(out, true, a, now_ms, now_us)
  return out
end
if role == 'r' and s.kind == 'read' then
  if s.owner == owner and seen(s.ops, op) then
    out[1] = 1
    if s.count > 1 then
      s.count = s.count - 1
      s.ops = forget(s.ops, op)
      redis.call('SET', W, lone_read_value(s), 'KEEPTTL')
    else
      redis.call('DEL', W)
    end
  end
  return out
end
if role == 'r' then
  local r = load_reader(owner, now_ms)
  if r and seen(r.ops, op) then
    out[1] = 1
    if r.count > 1 then
      r.count = r.count - 1
      r.ops = forget(r.ops, op)
      store_reader(owner, r, r.exp, now_ms)
      return out
    end
    drop_reader(owner)
  end
end
if s.kind == 'shared' or s.kind == 'missing' then
  -- A write hold that ran out (ended) is passed on as its release would
  -- have: to the readers that waited it out first (see readers_due).
  pass_and_settle(out, s.ended == true, a, now_ms, now_us)
elseif s.kind == 'write' then
  -- W was kept for this waiter (or read hold) too: no longer.
  leave_turn(W, s, a.turn)
end
return out
