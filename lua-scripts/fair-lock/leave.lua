-- Takes an owner that gave up waiting out of a fair lock's queue, waking the next head if that lets it go.
-- KEYS[1] lock key: hash of owner field -> hold count
-- KEYS[2] queue: list of waiting owner fields in arrival order, `redisson_lock_queue:{<lock key>}`
-- KEYS[3] timeouts: sorted set owner field -> absolute deadline in ms (Redis's clock)
-- KEYS[4] heartbeats: sorted set owner field -> heartbeat deadline of a latchkey waiter in ms
--   (Redis's clock), `{<lock key>}:latchkey_heartbeats`
-- ARGV[1] unlock channel: `redisson_lock__channel:{<lock key>}`; the head hears `0` on
--   `<unlock channel>:<owner field of the head>`
-- ARGV[2] owner: hash field of the owner that gave up
-- ARGV[3] wait step: Redisson's threadWaitTime (`fairLockWaitTimeout`), in milliseconds (integer > 0)
-- Every call first drops the queue's heads whose deadline or heartbeat deadline has passed (by
-- Redis's TIME). Then every entry of the owner goes, in the queue, the timeouts and the
-- heartbeats, and the deadlines of the waiters behind it move one wait step earlier (as
-- Redisson's acquireFailed moves them). When it headed the queue and the lock is free, heads
-- whose place lapsed are dropped again and `0` is published to the new head, if any.
-- Returns 1 when the owner was queued, 0 when it was not (a repeated call, or never queued).
local lockKey = KEYS[1]
local queueKey = KEYS[2]
local timeoutKey = KEYS[3]
local heartbeatKey = KEYS[4]
local channel = ARGV[1]
local owner = ARGV[2]
local step = tonumber(ARGV[3])

-- @include fair-queue

local now = redisNowMs()
dropStaleHeads(queueKey, timeoutKey, heartbeatKey, now)
return leaveQueue(lockKey, queueKey, timeoutKey, heartbeatKey, channel, owner, now, step)
