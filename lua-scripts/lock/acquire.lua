-- Takes a reentrant lock for one owner, or re-enters it (Redisson RLock layout); queues a waiter.
-- KEYS[1] lock key: hash of owner field -> hold count; its PTTL is the lease
-- KEYS[2] request key: exists only when cancel-acquire.lua gave this request up
-- KEYS[3] wait queue: list of waiters in arrival order (see include/hand-over.lua)
-- KEYS[4] foreign key: `latchkey_foreign:{<lock key>}`, hand-overs in a row while waiters of
--   Redisson's protocol listen, or a free left to them (see include/foreign-waiters.lua)
-- ARGV[1] lease: lease to set on the lock key, in milliseconds (integer > 0)
-- ARGV[2] owner: hash field of the owner, `<clientId>:<ownerId>`
-- ARGV[3] expected: hold count the caller believes the owner has before this call (integer >= 0)
-- ARGV[4] waiter: queue entry `<ticket> <lease> <grant channel> <owner>` to push when the lock
--   is held and the waiter is not queued; its ticket is new with every call; empty: not waiting
-- ARGV[5] queued as: the entry an earlier call left in the queue, as far as the caller knows;
--   empty: none
-- ARGV[6] queue TTL: how long the queue lives after a waiter joins, in milliseconds (integer > 0)
-- ARGV[7] retry: `1` when this call may repeat one that was applied (so ARGV[4] may be queued)
-- Returns nil when the owner now holds the lock at count expected + 1 (taken, re-entered, handed
--   over by a release, or a replay of this same request that had already been applied; the lease
--   is set either way, and the waiter's entry is removed);
--   {pttl, pushed} when another owner holds the lock: its PTTL in milliseconds (-1: no expiry),
--   and 1 when the waiter's entry in the queue is now ARGV[4], 0 when it is still ARGV[5] (or no
--   waiter was given). The queue is checked, never assumed: an entry that a release popped (to
--   hand the lock over) or dropped is replaced by ARGV[4], at the back;
--   -3 when the request was cancelled (KEYS[2] exists) and would take or re-enter the lock:
--   nothing is changed (a cancelled request may still queue its waiter; the client passes a
--   hand-over to a waiter it gave up on);
--   -4 when the owner's hold count is neither expected nor expected + 1 (its hold was lost).
-- On a read-only replica the answer -4, like every answer that writes, fails with READONLY
-- (include/refuse-on-replica.lua): a client that reached one asks again rather than hear its
-- hold was lost from a stale node.
local lockKey = KEYS[1]
local requestKey = KEYS[2]
local queueKey = KEYS[3]
local foreignKey = KEYS[4]
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
  return nil
end
return reply
