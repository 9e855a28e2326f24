-- Releases a simple token lock if the token still holds it (compare-and-delete), and says so.
-- KEYS[1] lock key
-- ARGV[1] unlock channel: `latchkey_unlock:{<lock key>}`, where latchkey's waiters listen
-- ARGV[2] token: the holder's token
-- Returns 1 when the key held the token and is deleted (`0` is published on the channel);
--   nil when it did not: the lease ran out, someone else holds it, or a replay of a release
--   that was applied (the caller tells them apart by whether it is retrying within the lease).
-- On a read-only replica every answer here fails with READONLY
-- (include/refuse-on-replica-string.lua), so a client that reached one asks again rather than
-- hear of its hold from a stale node. On a master out of memory (maxmemory reached, no eviction)
-- the answer nil fails with OOM instead.
local lockKey = KEYS[1]
local channel = ARGV[1]
local token = ARGV[2]

-- @include refuse-on-replica-string

if redis.call('get', lockKey) ~= token then
  -- From reads alone: on a replica, ask the master instead.
  refuseOnReplicaString(lockKey)
  return nil
end
redis.call('del', lockKey)
redis.call('publish', channel, '0')
return 1
