-- force: free the mutex whoever holds it, and hand it to the next waiter.
-- KEYS[1] lock hash; KEYS[2] waiter set; KEYS[3] fencing counter.
-- ARGV[1] wake channel base; ARGV[2] fencing counter ttl ms; ARGV[3] the
-- caller's process id (see hand_off).
-- Reply: {1 if the mutex was held, else 0}, followed by the waiter's
-- address, token and owner id if it was handed to a waiter.
if redis.call('HEXISTS', KEYS[1], 'owner') == 0 then
  return {0}
end
return {1, hand_off(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3])}
