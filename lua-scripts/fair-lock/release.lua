-- Releases one hold of a fair lock; the last hold frees it and wakes the owner at the queue's head alone.
-- KEYS[1] lock key: hash of owner field -> hold count
-- KEYS[2] queue: list of waiting owner fields in arrival order, `redisson_lock_queue:{<lock key>}`
-- KEYS[3] timeouts: sorted set owner field -> absolute deadline in ms (Redis's clock)
-- KEYS[4] heartbeats: sorted set owner field -> heartbeat deadline of a latchkey waiter in ms
--   (Redis's clock), `{<lock key>}:latchkey_heartbeats`
-- ARGV[1] unlock channel: `redisson_lock__channel:{<lock key>}`; the head hears `0` on
--   `<unlock channel>:<owner field of the head>`
-- ARGV[2] lease: lease to set on the lock key when holds remain, in milliseconds (integer > 0)
-- ARGV[3] owner: hash field of the owner, `<clientId>:<ownerId>`
-- ARGV[4] expected: hold count the caller believes the owner has before this call (integer >= 1)
-- Every call first drops the queue's heads whose deadline or heartbeat deadline has passed (by Redis's TIME).
-- Returns 0 when holds remain (count is now expected - 1), also when this same request is
--   replayed after being applied;
--   1 when the lock was freed: the key is deleted and `0` is published to the head, if any;
--   nil when the owner holds nothing: a replay of a last release that was applied, or a hold
--   that was lost (the caller tells them apart by whether it is retrying within the lease);
--   -4 when the owner's count is neither expected nor expected - 1 (nothing is changed).
-- On a read-only replica every answer here fails with READONLY (include/refuse-on-replica.lua),
-- so a client that reached one asks again rather than hear of its hold from a stale node.
local lockKey = KEYS[1]
local queueKey = KEYS[2]
local timeoutKey = KEYS[3]
local heartbeatKey = KEYS[4]
local channel = ARGV[1]
-- Handed on to Redis as the caller's text: Redis would format a Lua number with sprintf.
local lease = ARGV[2]
local owner = ARGV[3]
local expected = tonumber(ARGV[4])

-- @include fair-queue
-- @include refuse-on-replica

dropStaleHeads(queueKey, timeoutKey, heartbeatKey, redisNowMs())

local held = tonumber(redis.call('hget', lockKey, owner)) or 0
if held == expected and held > 0 then
  if held > 1 then
    redis.call('hincrby', lockKey, owner, '-1')
    redis.call('pexpire', lockKey, lease)
    return 0
  end
  redis.call('del', lockKey)
  wakeHead(queueKey, channel)
  return 1
end
-- Every other answer comes from reads alone.
refuseOnReplica(lockKey)
if held == 0 then
  return nil
end
-- A replay of a partial release whose reply was lost: report what it did, never apply it twice.
if held == expected - 1 then
  return 0
end
return -4
