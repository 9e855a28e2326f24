-- Takes every free permit of a semaphore, once per request.
-- KEYS[1] semaphore key: a string counter of free permits
-- KEYS[2] request key: this request's recorded reply, so a copy of it takes nothing more
-- ARGV[1] record TTL: how long KEYS[2] keeps the reply, in milliseconds (integer > 0)
-- Returns the number of permits taken: the free count when it was above 0 (it is now 0), else 0.
local semaphoreKey = KEYS[1]
local requestKey = KEYS[2]
local recordTtl = ARGV[1]

local recorded = redis.call('get', requestKey)
if recorded then
  return tonumber(recorded)
end
local value = redis.call('get', semaphoreKey)
local taken = 0
if value and tonumber(value) > 0 then
  -- DECRBY rather than SET keeps any TTL a foreign client put on the counter.
  redis.call('decrby', semaphoreKey, value)
  taken = tonumber(value)
end
redis.call('set', requestKey, taken, 'px', recordTtl)
return taken
