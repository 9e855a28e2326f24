-- Deletes a read-write lock whoever holds it, in either mode, and publishes `1` so every waiter tries again.
-- KEYS[1] lock key
-- ARGV[1] channel: `redisson_rwlock:{<lock key>}`
-- Returns 1 when a lock was deleted, 0 when the key did not exist. Readers' lease keys are left to
--   expire on their own (within one lease): without the hash they grant nothing.
local lockKey = KEYS[1]
local channel = ARGV[1]

if redis.call('del', lockKey) == 1 then
  redis.call('publish', channel, '1')
  return 1
end
return 0
