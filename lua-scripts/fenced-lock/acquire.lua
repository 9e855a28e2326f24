-- Takes or re-enters a fenced lock (Redisson RFencedLock layout) and returns a new fencing token.
-- KEYS[1] lock key: hash of owner field -> hold count; its PTTL is the lease
-- KEYS[2] request key: exists only when cancel-acquire.lua gave this request up
-- KEYS[3] wait queue: list of waiters in arrival order (see include/hand-over.lua)
-- KEYS[4] foreign key: `latchkey_foreign:{<lock key>}`, hand-overs in a row while waiters of
--   Redisson's protocol listen, or a free left to them (see include/foreign-waiters.lua)
-- KEYS[5] token key: `redisson_lock_token:{<lock key>}`, a counter with no TTL
-- ARGV[1] lease: lease to set on the lock key, in milliseconds (integer > 0)
-- ARGV[2] owner: hash field of the owner, `<clientId>:<ownerId>`
-- ARGV[3] expected: hold count the caller believes the owner has before this call (integer >= 0)
-- ARGV[4] waiter: queue entry to push when the lock is held and the waiter is not queued; empty:
--   not waiting (as in lock/acquire.lua)
-- ARGV[5] queued as: the entry an earlier call left in the queue; empty: none
-- ARGV[6] queue TTL: how long the queue lives after a waiter joins, in milliseconds (integer > 0)
-- ARGV[7] retry: `1` when this call may repeat one that was applied (so ARGV[4] may be queued)
-- Returns the new fencing token (integer >= 1, from INCR of KEYS[5]) when the owner now holds the
--   lock at count expected + 1: every acquisition, re-entry, confirmed hand-over or replay gets a
--   token larger than any issued before, so a token never goes back;
--   otherwise what lock/acquire.lua returns: {pttl, pushed} when another owner holds the lock,
--   -3 when the request was cancelled, -4 when the owner's hold was lost.
-- On a read-only replica the answer -4, like every answer that writes, fails with READONLY
-- (include/refuse-on-replica.lua): a client that reached one asks again rather than hear its
-- hold was lost from a stale node.
local lockKey = KEYS[1]
local requestKey = KEYS[2]
local queueKey = KEYS[3]
local foreignKey = KEYS[4]
local tokenKey = KEYS[5]
-- Numbers handed on to Redis stay the caller's text: Redis would format Lua numbers with sprintf.
local lease = ARGV[1]
local owner = ARGV[2]
local expected = tonumber(ARGV[3])
local waiter = ARGV[4]
local queuedAs = ARGV[5]
local queueTtl = ARGV[6]
local retry = ARGV[7] == '1'

-- @include reentrant-acquire

local reply = acquireHold(lockKey, requestKey, queueKey, foreignKey, lease, owner, expected, waiter, queuedAs, queueTtl, retry)
if reply == true then
  return redis.call('incr', tokenKey)
end
return reply
