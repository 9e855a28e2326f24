-- Announces a semaphore's free permits again, for waiters whose wake-up another waiter used up.
-- KEYS[1] semaphore key: a string counter of free permits
-- ARGV[1] semaphore channel: `redisson_sc:{<key>}`, told the count when permits are free
-- Returns the count of free permits announced, 0 when none are free (nothing is published).
local semaphoreKey = KEYS[1]
local channel = ARGV[1]

local value = tonumber(redis.call('get', semaphoreKey) or '0')
if value > 0 then
  redis.call('publish', channel, value)
  return value
end
return 0
