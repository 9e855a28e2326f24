-- Counts the free permits of a permit semaphore, after giving back the permits whose leases ended.
-- KEYS[1] counter: a string holding the number of free permits
-- KEYS[2] timeout set: `{<counter>}:timeout`, permit ids out -> end of their lease
-- ARGV[1] channel: `redisson_sc:{<counter>}`, told the count of free permits when this call gives
--   permits back or creates the counter with free permits
-- ARGV[2] initial permits: the count the counter is created with when it does not exist (integer >= 0),
--   or empty to leave a missing counter missing
-- Returns an array: the number of free permits (0 for a missing counter), the number of permits out, and
--   the milliseconds until the earliest lease of those ends (-1: none will end).
local counterKey = KEYS[1]
local timeoutKey = KEYS[2]
local channel = ARGV[1]
local initialPermits = ARGV[2]

-- @include permit-reclaim

local now = permitNowMs()
reclaimExpiredPermits(counterKey, timeoutKey, channel, now)
local created = createCounter(counterKey, initialPermits)
local free = tonumber(redis.call('get', counterKey)) or 0
if created and free > 0 then
  redis.call('publish', channel, free)
end
return { free, redis.call('zcard', timeoutKey), untilEarliestExpiry(timeoutKey, now) }
