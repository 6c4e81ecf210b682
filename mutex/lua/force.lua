-- force: free the mutex whoever holds it, and wake one waiter. A mutex
-- that is only reserved for a woken waiter (see hand_off) is left to it.
-- KEYS[1] lock hash; KEYS[2] waiter set.
-- ARGV[1] wake channel base; ARGV[2] hand-off window ms.
-- Reply: 1 if the mutex was held, else 0.
if redis.call('HEXISTS', KEYS[1], 'owner') == 0 then
  return 0
end
hand_off(KEYS[1], KEYS[2], ARGV[1], ARGV[2])
return 1
