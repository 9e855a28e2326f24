-- Deletes a semaphore's counter. A script rather than a plain DEL, so that with syncReplicas the wait for replicas can go right behind it.
-- KEYS[1] semaphore key: a string counter of free permits
-- Returns 1 when the counter existed, 0 when it did not.
local semaphoreKey = KEYS[1]

return redis.call('del', semaphoreKey)
