-- Deletes a lock whoever holds it, and publishes the unlock message `0` to wake its waiters.
-- KEYS[1] lock key
-- KEYS[2] unlock channel: `redisson_lock__channel:{<lock key>}`
-- Returns 1 when a lock was deleted, 0 when the key did not exist.
local lockKey = KEYS[1]
local channel = KEYS[2]

if redis.call('del', lockKey) == 1 then
  redis.call('publish', channel, 0)
  return 1
end
return 0
