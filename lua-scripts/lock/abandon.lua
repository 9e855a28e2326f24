-- Drops every hold of one owner that has given its lock up for lost, so no stale hold lingers.
-- KEYS[1] lock key
-- KEYS[2] wait queue: list of waiters in arrival order (see include/hand-over.lua)
-- KEYS[3] foreign key: `latchkey_foreign:{<lock key>}`, hand-overs in a row while waiters of
--   Redisson's protocol listen, or a free left to them (see include/foreign-waiters.lua)
-- ARGV[1] unlock channel: `redisson_lock__channel:{<lock key>}`
-- ARGV[2] owner: hash field of the owner that lost the lock
-- Returns 1 when the owner's field was there and is removed, 0 when it was already gone.
local lockKey = KEYS[1]
local queueKey = KEYS[2]
local foreignKey = KEYS[3]
local channel = ARGV[1]
local owner = ARGV[2]

-- @include reentrant-drop

return abandonHold(lockKey, queueKey, foreignKey, channel, owner, nil)
