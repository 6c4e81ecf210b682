-- inspect: read a wait group, without writing.
-- KEYS: see state.lua (hash, holders, waiters, done).
-- Reply: {units pending, the phase's generation ('' if none), the first
-- abandonment ('<owner> <units>', '' if none), live waiters}, then per
-- owner with units: its id, its units, ms its lease has left. Units whose
-- lease ended are abandoned, unless the phase keeps them (left <= 0).
local k = wg_keys()
local st = wg_load(k)
if not st then
  return {0, '', '', 0}
end
local now_ms = now()
local out = {0, st.gen, '', redis.call('ZCOUNT', k.waiters, '(' .. now_ms, '+inf')}
local ab = st.ab
local hs = redis.call('ZRANGE', k.holders, 0, -1, 'WITHSCORES')
for i = 1, #hs, 2 do
  local e = wg_entry(k, hs[i])
  local left = tonumber(hs[i + 1]) - now_ms
  if e and left <= 0 and not st.keep then
    st.n, ab = st.n - e.units, ab or (e.owner .. ' ' .. e.units)
  elseif e then
    out[#out + 1], out[#out + 2], out[#out + 3] = e.owner, e.units, left
  end
end
out[1], out[3] = st.n, ab or ''
return out
