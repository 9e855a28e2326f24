-- Gives up a semaphore acquire whose outcome is unknown: refuses any late copy, gives back the permits if it was applied.
-- KEYS[1] semaphore key: a string counter of free permits
-- KEYS[2] request key of the acquire request being given up
-- ARGV[1] permits: how many permits the request asked for (integer >= 1)
-- ARGV[2] record TTL: how long KEYS[2] refuses the request, in milliseconds (integer > 0)
-- ARGV[3] semaphore channel: `redisson_sc:{<key>}`, told the new count when permits are given back
-- Returns 1 when the request had taken its permits and they are given back;
--   0 when it had taken none (not applied, too few free, or already given up).
local semaphoreKey = KEYS[1]
local requestKey = KEYS[2]
local permits = ARGV[1]
local recordTtl = ARGV[2]
local channel = ARGV[3]

local recorded = redis.call('get', requestKey)
redis.call('set', requestKey, 'cancelled', 'px', recordTtl)
if recorded == false or string.sub(recorded, 1, 2) ~= '1 ' then
  return 0
end
local count = redis.call('incrby', semaphoreKey, permits)
redis.call('publish', channel, count)
return 1
