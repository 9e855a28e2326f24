-- Deletes a lock whoever holds it, and hands it to the next waiter or publishes `0`.
-- KEYS[1] lock key
-- KEYS[2] unlock channel: `redisson_lock__channel:{<lock key>}`
-- KEYS[3] wait queue: sorted set of waiters (see include/hand-over.lua)
-- Returns 1 when a lock was deleted, 0 when the key did not exist.
local lockKey = KEYS[1]
local channel = KEYS[2]
local queueKey = KEYS[3]

-- @include hand-over

if redis.call('del', lockKey) == 1 then
  handOver(lockKey, channel, queueKey)
  return 1
end
return 0
