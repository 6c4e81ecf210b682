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
local gen, now_ms = ARGV[12], now()
if ARGV[13] == '1' then
  redis.call('ZREM', waiters, a.entry)
  return 0
end
local st = wg_load(now_ms)
if st and (gen == '' or gen == st.gen) then
  if st.ab then
    redis.call('ZREM', waiters, a.entry)
    return redis.error_reply('DSYNC abandoned ' .. st.ab)
  elseif st.n <= 0 then
    return 0
  elseif a.entry ~= '' then
    redis.call('ZADD', waiters, now_ms + a.entry_ttl, a.entry)
    expire_at_least(waiters, a.entry_ttl)
  end
  local first = redis.call('ZRANGE', holders, 0, 0, 'WITHSCORES')
  return {0, (st.keep or not first[2]) and -1 or math.max(0, first[2] - now_ms), st.gen}
elseif gen == '' then
  return 0
end
for m in string.gmatch(redis.call('GET', done) or '', '%S+') do
  local g, ab = string.match(m, '^(%d+):?(.*)$')
  if g == gen then
    return ab == '' and 0 or redis.error_reply('DSYNC abandoned ' .. string.gsub(ab, ':', ' '))
  end
end
return redis.error_reply('DSYNC vanished')
