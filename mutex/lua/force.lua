-- force: free the mutex whoever holds it, and wake one waiter.
-- KEYS[1] lock hash; KEYS[2] waiter set.
-- ARGV[1] wake channel.
-- Reply: 1 if the mutex was held, else 0.
local held = redis.call('DEL', KEYS[1])
local now_ms = now()
wake_next(KEYS[2], ARGV[1], now_ms)
return held
