-- Deletes a simple token lock whoever holds it, and tells latchkey's waiters.
-- KEYS[1] lock key
-- ARGV[1] unlock channel: `latchkey_unlock:{<lock key>}`
-- Returns 1 when a lock was deleted, 0 when the key did not exist.
local lockKey = KEYS[1]
local channel = ARGV[1]

if redis.call('del', lockKey) == 1 then
  redis.call('publish', channel, '0')
  return 1
end
return 0
