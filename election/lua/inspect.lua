-- inspect: read the election's state.
-- KEYS: the election's five (see election_keys).
-- ARGV[1] how many queued candidates to list.
-- Reply: {rev, lapsed (0/1), token (the last one if lapsed, '0' if none
-- is known), began ms (0 if unknown), remaining ms of the term (0 if
-- lapsed, -1 if no expiry), value, leader's owner id, hold id (both ''
-- if lapsed), live candidates queued, then the values of the first
-- ARGV[1] of them in order}. The head is what observers are told (see
-- term.lua).
local k = election_keys()
local out, err = read_leader(k.lock, k.leader)
if not out then
  return err
end
local now_ms = now()
local queued = redis.pcall('ZCOUNT', k.expiry, '(' .. now_ms, '+inf')
if type(queued) ~= 'number' then
  return unexpected(k.expiry, queued.err)
end
out[9] = queued
local want = tonumber(ARGV[1])
if want > 0 and queued > 0 then
  local q = redis.pcall('ZRANGE', k.queue, 0, -1)
  if q.err then
    return unexpected(k.queue, q.err)
  end
  for _, e in ipairs(q) do
    if #out - 9 >= want then
      break
    end
    local exp = redis.call('ZSCORE', k.expiry, e)
    if exp and tonumber(exp) > now_ms then
      local v = redis.pcall('HGET', k.values, e)
      if type(v) ~= 'string' then
        v = ''
      end
      out[#out + 1] = v
    end
  end
end
return out
