-- Takes a waiter that gave up out of a fenced lock's queue, passing the lock on if it was handed to it.
-- KEYS[1] lock key
-- KEYS[2] wait queue: list of waiters in arrival order (see include/hand-over.lua)
-- KEYS[3] foreign key: `latchkey_foreign:{<lock key>}`, hand-overs in a row while waiters of
--   Redisson's protocol listen, or a free left to them (see include/foreign-waiters.lua)
-- KEYS[4] token key: `redisson_lock_token:{<lock key>}`
-- ARGV[1] unlock channel: `redisson_lock__channel:{<lock key>}`
-- ARGV[2] owner: hash field of the waiter's owner
-- ARGV[3] waiter: the waiter's queue entry
-- ARGV[4] handed: `1` when the owner holds nothing but what a hand-over to this waiter gave it
-- Returns 0 when the waiter was still queued or gone, 1 when the lock had been handed to it and
--   is now passed on (with a new fencing token) to the next waiter, or announced free.
local lockKey = KEYS[1]
local queueKey = KEYS[2]
local foreignKey = KEYS[3]
local tokenKey = KEYS[4]
local channel = ARGV[1]
local owner = ARGV[2]
local waiter = ARGV[3]
local handed = ARGV[4] == '1'

-- @include reentrant-drop

return withdrawWaiter(lockKey, queueKey, foreignKey, channel, owner, waiter, handed, function()
  return redis.call('incr', tokenKey)
end)
