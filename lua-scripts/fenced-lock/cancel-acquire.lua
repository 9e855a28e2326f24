-- Gives up a fenced-lock acquire whose outcome is unknown: refuses late replays, undoes it if applied.
-- KEYS[1] lock key
-- KEYS[2] request key of the acquire request being given up
-- KEYS[3] wait queue: list of waiters in arrival order (see include/hand-over.lua)
-- KEYS[4] foreign key: `latchkey_foreign:{<lock key>}`, hand-overs in a row while waiters of
--   Redisson's protocol listen, or a free left to them (see include/foreign-waiters.lua)
-- KEYS[5] token key: `redisson_lock_token:{<lock key>}`
-- ARGV[1] unlock channel: `redisson_lock__channel:{<lock key>}`
-- ARGV[2] owner: hash field of the owner that sent the request
-- ARGV[3] expected: the `expected` the request carried (hold count before it, integer >= 0)
-- ARGV[4] request TTL: how long KEYS[2] refuses the request, in milliseconds (integer > 0)
-- ARGV[5] waiter: the queue entry the request would push, removed from the queue; empty: none
-- ARGV[6] queued as: the entry the request found queued, removed from the queue; empty: none
-- Returns 1 when the request had been applied and is now undone, 0 when it had not been applied.
local lockKey = KEYS[1]
local requestKey = KEYS[2]
local queueKey = KEYS[3]
local foreignKey = KEYS[4]
local tokenKey = KEYS[5]
local channel = ARGV[1]
local owner = ARGV[2]
local expected = tonumber(ARGV[3])
local requestTtl = ARGV[4]
local waiter = ARGV[5]
local queuedAs = ARGV[6]

-- @include reentrant-release

return cancelAcquire(lockKey, requestKey, queueKey, foreignKey, channel, owner, expected, requestTtl, waiter, queuedAs, function()
  return redis.call('incr', tokenKey)
end)
