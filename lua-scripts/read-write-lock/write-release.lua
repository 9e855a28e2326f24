-- Releases one write hold; the last frees the lock (or leaves the owner's read holds) and publishes `1`.
-- KEYS[1] lock key
-- ARGV[1] channel: `redisson_rwlock:{<lock key>}`
-- ARGV[2] lease: lease the lock key keeps at least when write holds remain, in milliseconds (integer > 0)
-- ARGV[3] writer: the owner's writer field
-- ARGV[4] expected: write count the caller believes the owner has before this call (integer >= 1)
-- Returns 0 when write holds remain (count is now expected - 1), also when this same request is
--   replayed after being applied;
--   1 when that was the last write hold: the lock is deleted, or set to read mode when the owner
--   also holds the read lock (a downgrade); `1` is published either way, so waiters try again;
--   nil when the owner holds no write lock: a replay of a last release, or a lost hold;
--   -4 when the owner's count is neither expected nor expected - 1 (nothing is changed).
-- On a read-only replica every answer here fails with READONLY (include/refuse-on-replica.lua),
-- so a client that reached one asks again rather than hear of its hold from a stale node.
local lockKey = KEYS[1]
local channel = ARGV[1]
local lease = ARGV[2]
local writer = ARGV[3]
local expected = tonumber(ARGV[4])

-- @include read-write-lock
-- @include refuse-on-replica

local held = tonumber(redis.call('hget', lockKey, writer)) or 0
if held == expected and held > 0 then
  if held > 1 then
    redis.call('hincrby', lockKey, writer, '-1')
    extendTo(lockKey, lease)
    return 0
  end
  redis.call('hdel', lockKey, writer)
  afterWriterLeft(lockKey, channel)
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
