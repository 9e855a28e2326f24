-- Reads a semaphore's count of free permits, creating the counter with its initial count when it is missing.
-- KEYS[1] semaphore key: a string counter of free permits
-- ARGV[1] initial permits: the count to create the counter with when it is missing (integer >= 0);
--   empty: a missing counter reads as 0 and stays missing
-- ARGV[2] semaphore channel: `redisson_sc:{<key>}`, told the count when this call creates the counter
-- Returns the count of free permits (may be negative after addPermits with a negative number).
local semaphoreKey = KEYS[1]
local initial = ARGV[1]
local channel = ARGV[2]

local value = redis.call('get', semaphoreKey)
if value == false and initial ~= '' then
  redis.call('set', semaphoreKey, initial, 'nx')
  value = initial
  if tonumber(initial) > 0 then
    redis.call('publish', channel, initial)
  end
end
return tonumber(value or '0')
