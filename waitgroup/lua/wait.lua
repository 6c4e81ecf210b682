-- wait: one attempt of a Wait, which ends when the count is 0; or, with
-- ARGV[13] '1', the waiter leaving.
-- KEYS: see state.lua (hash, holders, waiters, done).
-- ARGV: the header (see codec.lua), of which the channel, the waiter
-- entry ('' before it joined the channel) and its ttl count; ARGV[12] the
-- generation of the phase the waiter registered in, '' before it did.
-- Reply: 0 when the count is 0, or the phase the waiter registered in
-- ended; else the waiter is registered (if it has an entry), and the
-- reply is {0, ms until the earliest lease ends (-1 if none counts), the
-- phase's generation}. The error "DSYNC abandoned <owner> <units>" when
-- units of that phase were abandoned, "DSYNC vanished" when its state is
-- gone but no end of it was recorded.
local a = header()
local k = wg_keys()
local gen = ARGV[12]
if ARGV[13] == '1' then
  redis.call('ZREM', k.waiters, a.entry)
  return 0
end
local now_ms = now()
local st = wg_load(k)
if st then
  wg_purge(k, st, now_ms)
  wg_save(k, st, a)
  if gen == '' or gen == st.gen then
    if st.ab then
      redis.call('ZREM', k.waiters, a.entry)
      return redis.error_reply('DSYNC abandoned ' .. st.ab)
    elseif st.n <= 0 then
      return 0
    end
    if a.entry ~= '' then
      redis.call('ZADD', k.waiters, now_ms + tonumber(a.entry_ttl), a.entry)
      expire_at_least(k.waiters, a.entry_ttl)
    end
    local first = redis.call('ZRANGE', k.holders, 0, 0, 'WITHSCORES')
    if st.keep or not first[2] then
      return {0, -1, st.gen}
    end
    return {0, math.max(0, tonumber(first[2]) - now_ms), st.gen}
  end
end
if gen == '' then
  return 0
end
for m in string.gmatch(redis.call('GET', k.done) or '', '%S+') do
  local g, owner, units = string.match(m, '^(%d+):?(%x*):?(%d*)$')
  if g == gen and owner ~= '' then
    return redis.error_reply('DSYNC abandoned ' .. owner .. ' ' .. units)
  elseif g == gen then
    return 0
  end
end
return redis.error_reply('DSYNC vanished')
