-- Gives up a semaphore drain that too few replicas acknowledged: refuses any late copy, gives back the permits it took.
-- KEYS[1] semaphore key: a string counter of free permits
-- KEYS[2] request key of the drain request being given up (it records how many permits it took)
-- ARGV[1] record TTL: how long KEYS[2] refuses the request, in milliseconds (integer > 0)
-- ARGV[2] semaphore channel: `redisson_sc:{<key>}`, told the new count when permits are given back
-- Returns the number of permits given back: 0 when the drain took none, was not applied, or was
--   already given up.
local semaphoreKey = KEYS[1]
local requestKey = KEYS[2]
local recordTtl = ARGV[1]
local channel = ARGV[2]

local taken = tonumber(redis.call('get', requestKey))
-- A drain's record is the number it took; anything else (none, or 'cancelled') gives nothing back.
redis.call('set', requestKey, 'cancelled', 'px', recordTtl)
if taken == nil or taken <= 0 then
  return 0
end
local count = redis.call('incrby', semaphoreKey, taken)
redis.call('publish', channel, count)
return taken
