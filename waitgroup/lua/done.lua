-- done: count units of an owner's hold down (Done), or undo an Add whose
-- reply was lost; at a count of 0 the phase ends (see wg_save).
-- KEYS: see state.lua (hash, holders, waiters, done).
-- ARGV: the header (see codec.lua), with the owner's hold id (which an
-- undo ignores); ARGV[12] the units; ARGV[13] the operation id of the Add
-- to undo, '' for a Done.
-- Reply: {the owner's units left, -1 if it holds none of that hold; the
-- hold id, prefixed with '!' if it holds fewer than the units and nothing
-- was counted down}.
local a = header()
local units, undo = tonumber(ARGV[12]), ARGV[13]
local st = wg_load(now())
if not st then
  return {-1, ''}
end
local e = wg_entry(a.owner)
local out = {-1, ''}
if e and (undo ~= '' or e.id == a.id) then
  local fresh = undo == '' and not seen(e.ops, a.op)
  out = {e.units, e.id}
  if fresh and units > e.units then
    out[2] = '!' .. e.id
  elseif fresh or undo ~= '' and seen(e.ops, undo) then
    units = math.min(units, e.units)
    e.units, st.n = e.units - units, st.n - units
    e.ops = fresh and remember(e.ops, a.op, now_s(), op_memory) or forget(e.ops, undo)
    out[1] = e.units
  end
end
wg_save(st, a, e)
return out
