-- Releases one hold of a reentrant lock; the last hold frees the lock for the next waiter.
-- KEYS[1] lock key: hash of owner field -> hold count
-- KEYS[2] wait queue: list of waiters in arrival order (see include/hand-over.lua)
-- KEYS[3] foreign key: `latchkey_foreign:{<lock key>}`, hand-overs in a row while waiters of
--   Redisson's protocol listen, or a free left to them (see include/foreign-waiters.lua)
-- ARGV[1] unlock channel: `redisson_lock__channel:{<lock key>}`
-- ARGV[2] lease: lease to set on the lock key when holds remain, in milliseconds (integer > 0)
-- ARGV[3] owner: hash field of the owner, `<clientId>:<ownerId>`
-- ARGV[4] expected: hold count the caller believes the owner has before this call (integer >= 1)
-- Returns 0 when holds remain (count is now expected - 1), also when this same request is
--   replayed after being applied;
--   1 when the lock was freed: handed to the first live waiter in the queue, or deleted with `0`
--   published on the unlock channel;
--   nil when the owner holds nothing: a replay of a last release that was applied, or a hold
--   that was lost (the caller tells them apart by whether it is retrying within the lease);
--   -4 when the owner's count is neither expected nor expected - 1 (nothing is changed).
-- On a read-only replica every answer here fails with READONLY (include/refuse-on-replica.lua),
-- so a client that reached one asks again rather than hear of its hold from a stale node.
local lockKey = KEYS[1]
local queueKey = KEYS[2]
local foreignKey = KEYS[3]
local channel = ARGV[1]
-- Handed on to Redis as the caller's text: Redis would format a Lua number with sprintf.
local lease = ARGV[2]
local owner = ARGV[3]
local expected = tonumber(ARGV[4])

-- @include reentrant-release

return releaseHold(lockKey, queueKey, foreignKey, channel, lease, owner, expected, nil)
