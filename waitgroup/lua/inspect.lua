-- inspect: read a wait group, without writing.
-- KEYS: see state.lua (hash, holders, waiters, done).
-- Reply: {units pending, the owner of the first abandonment ('' if none),
-- its units, live waiters}, then per owner with units: its id, its units,
-- ms its lease has left. Units whose lease ended are abandoned, unless the
-- phase keeps them (with 0 or less left).
local st, now_ms = wg_load() or {n = 0}, now()
local out = {0, '', 0, redis.call('ZCOUNT', waiters, '(' .. now_ms, '+inf')}
local hs = redis.call('ZRANGE', holders, 0, -1, 'WITHSCORES')
for i = 1, #hs, 2 do
  local e, left = wg_entry(hs[i]), hs[i + 1] - now_ms
  if e and left <= 0 and not st.keep then
    st.n, st.ab = st.n - e.units, st.ab or (e.owner .. ' ' .. e.units)
  elseif e then
    out[#out + 1], out[#out + 2], out[#out + 3] = e.owner, e.units, left
  end
end
out[1], out[2], out[3] = st.n, string.match(st.ab or ' 0', '^(%S*) (%d+)$')
return out
