-- Releases one hold of a reentrant lock; the last hold deletes the lock and publishes `0`.
-- KEYS[1] lock key: hash of owner field -> hold count
-- KEYS[2] unlock channel: `redisson_lock__channel:{<lock key>}`
-- KEYS[3] request key: remembers for a while that this request deleted the lock
-- ARGV[1] lease: lease to set on the lock key when holds remain, in milliseconds (integer > 0)
-- ARGV[2] owner: hash field of the owner, `<clientId>:<ownerId>`
-- ARGV[3] expected: hold count the caller believes the owner has before this call (integer >= 1)
-- ARGV[4] request TTL: how long KEYS[3] is kept, in milliseconds (integer > 0)
-- Returns 0 when holds remain (count is now expected - 1), 1 when the lock was deleted and the
--   unlock message published; both also when this same request is replayed after being applied;
--   nil when the owner does not hold the lock at count expected (lost, expired, force-released).
local lockKey = KEYS[1]
local channel = KEYS[2]
local requestKey = KEYS[3]
local lease = tonumber(ARGV[1])
local owner = ARGV[2]
local expected = tonumber(ARGV[3])
local requestTtl = tonumber(ARGV[4])

local held = tonumber(redis.call('hget', lockKey, owner)) or 0
if held == expected and held > 0 then
  if held > 1 then
    redis.call('hincrby', lockKey, owner, -1)
    redis.call('pexpire', lockKey, lease)
    return 0
  end
  redis.call('del', lockKey)
  redis.call('publish', channel, 0)
  redis.call('set', requestKey, 1, 'px', requestTtl)
  return 1
end

-- Replays of a request whose reply was lost: report what it did, never apply it twice.
if held > 0 and held == expected - 1 then
  return 0
end
if held == 0 and expected == 1 and redis.call('exists', requestKey) == 1 then
  return 1
end
return nil
