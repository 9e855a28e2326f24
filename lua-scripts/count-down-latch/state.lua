-- Reads a count-down latch's count and how long its key has left, in one step.
-- KEYS[1] latch key: a string holding the count
-- Returns {count, pttl}: count is the key's value as stored (nil when the key does not exist);
--   pttl is the key's remaining lifetime in milliseconds, -1 when it has none, -2 with no key.
local latchKey = KEYS[1]

return { redis.call('get', latchKey), redis.call('pttl', latchKey) }
