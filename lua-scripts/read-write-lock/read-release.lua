-- Releases one read hold; the last reader to leave frees the lock and publishes `0`.
-- KEYS[1] lock key
-- KEYS[2] lease prefix: `{<lock key>}:<owner>:rwlock_timeout`
-- ARGV[1] channel: `redisson_rwlock:{<lock key>}`
-- ARGV[2] owner: the owner's reader field
-- ARGV[3] expected: read count the caller believes the owner has before this call (integer >= 1)
-- Returns 0 when the owner keeps read holds (count is now expected - 1), also when this same
--   request is replayed after being applied;
--   1 when that was the owner's last read hold (the lock is freed with `0` published if no other
--   live hold is left; otherwise, in read mode, its PTTL becomes the longest reader lease left);
--   nil when the owner holds no read lock: a replay of a last release, or a lost hold;
--   -4 when the owner's count is neither expected nor expected - 1 (nothing is changed).
-- On a read-only replica every answer here fails with READONLY (include/refuse-on-replica.lua),
-- so a client that reached one asks again rather than hear of its hold from a stale node.
local lockKey = KEYS[1]
local leasePrefix = KEYS[2]
local channel = ARGV[1]
local owner = ARGV[2]
local expected = tonumber(ARGV[3])

-- @include read-write-lock
-- @include refuse-on-replica

local held = tonumber(redis.call('hget', lockKey, owner)) or 0
if held == expected and held > 0 then
  dropReadHold(lockKey, leasePrefix, owner, held)
  afterReaderChange(lockKey, leaseBase(leasePrefix, owner), channel)
  if held > 1 then
    return 0
  end
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
