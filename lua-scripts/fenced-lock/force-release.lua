-- Deletes a fenced lock whoever holds it, and hands it on with a new token or publishes `0`.
-- KEYS[1] lock key
-- KEYS[2] wait queue: list of waiters in arrival order (see include/hand-over.lua)
-- KEYS[3] foreign key: `latchkey_foreign:{<lock key>}`, hand-overs in a row while waiters of
--   Redisson's protocol listen, or a free left to them (see include/foreign-waiters.lua)
-- KEYS[4] token key: `redisson_lock_token:{<lock key>}`; kept, so tokens never go back
-- ARGV[1] unlock channel: `redisson_lock__channel:{<lock key>}`
-- Returns 1 when a lock was deleted, 0 when the key did not exist.
local lockKey = KEYS[1]
local queueKey = KEYS[2]
local foreignKey = KEYS[3]
local tokenKey = KEYS[4]
local channel = ARGV[1]

-- @include reentrant-drop

return forceRelease(lockKey, queueKey, foreignKey, channel, function()
  return redis.call('incr', tokenKey)
end)
