-- Deletes a lock whoever holds it, and hands it to the next waiter or publishes `0`.
-- KEYS[1] lock key
-- KEYS[2] wait queue: list of waiters in arrival order (see include/hand-over.lua)
-- KEYS[3] foreign key: `latchkey_foreign:{<lock key>}`, hand-overs in a row while waiters of
--   Redisson's protocol listen, or a free left to them (see include/foreign-waiters.lua)
-- ARGV[1] unlock channel: `redisson_lock__channel:{<lock key>}`
-- Returns 1 when a lock was deleted, 0 when the key did not exist.
local lockKey = KEYS[1]
local queueKey = KEYS[2]
local foreignKey = KEYS[3]
local channel = ARGV[1]

-- @include reentrant-drop

return forceRelease(lockKey, queueKey, foreignKey, channel, nil)
