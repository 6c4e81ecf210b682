-- done: count units of an owner's hold down (Done), or undo an Add whose
-- reply was lost; at a count of 0 the phase ends (see wg_save).
-- KEYS: see state.lua (hash, holders, waiters, done).
-- ARGV: the header (see codec.lua), with the owner's hold id (ignored by
-- an undo); ARGV[12] the units; ARGV[13] the operation id of the Add to
-- undo, '' for a Done.
-- Reply: {the owner's units left, -1 if it holds none of that hold; the
-- hold id, prefixed with '!' if it holds fewer than the units and nothing
-- changed}, followed by every waiter woken (see hand_to).
local a = header()
local k = wg_keys()
local units, undo = tonumber(ARGV[12]), ARGV[13]
local st = wg_load(k)
if not st then
  return {-1, ''}
end
wg_purge(k, st, now())
local e = wg_entry(k, a.owner)
local out = {-1, ''}
if e and undo ~= '' then
  if seen(e.ops, undo) then
    units = math.min(units, e.units)
    e.units, st.n, e.ops = e.units - units, st.n - units, forget(e.ops, undo)
    wg_put(k, e)
  end
  out = {e.units, e.id}
elseif e and e.id == a.id then
  if seen(e.ops, a.op) then
    return {e.units, e.id}
  elseif units > e.units then
    return {e.units, '!' .. e.id}
  end
  e.units, st.n = e.units - units, st.n - units
  e.ops = remember(e.ops, a.op, now_s(), op_memory)
  wg_put(k, e)
  out = {e.units, e.id}
end
wg_save(k, st, a, out)
return out
