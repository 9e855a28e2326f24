-- Releases one hold of a fenced lock; the last hold hands it on with a new fencing token.
-- KEYS[1] lock key: hash of owner field -> hold count
-- KEYS[2] wait queue: list of waiters in arrival order (see include/hand-over.lua)
-- KEYS[3] foreign key: `latchkey_foreign:{<lock key>}`, hand-overs in a row while waiters of
--   Redisson's protocol listen, or a free left to them (see include/foreign-waiters.lua)
-- KEYS[4] token key: `redisson_lock_token:{<lock key>}`
-- ARGV[1] unlock channel: `redisson_lock__channel:{<lock key>}`
-- ARGV[2] lease: lease to set on the lock key when holds remain, in milliseconds (integer > 0)
-- ARGV[3] owner: hash field of the owner
-- ARGV[4] expected: hold count the caller believes the owner has before this call (integer >= 1)
-- Returns what lock/release.lua returns (0 holds remain, 1 freed, nil holds nothing, -4 changed);
--   a hand-over's grant message is `<ticket> <token>`, the token from INCR of KEYS[4].
-- On a read-only replica every answer here fails with READONLY (include/refuse-on-replica.lua),
-- so a client that reached one asks again rather than hear of its hold from a stale node.
local lockKey = KEYS[1]
local queueKey = KEYS[2]
local foreignKey = KEYS[3]
local tokenKey = KEYS[4]
local channel = ARGV[1]
local lease = ARGV[2]
local owner = ARGV[3]
local expected = tonumber(ARGV[4])

-- @include reentrant-release

return releaseHold(lockKey, queueKey, foreignKey, channel, lease, owner, expected, function()
  return redis.call('incr', tokenKey)
end)
