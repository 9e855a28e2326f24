-- Takes a reentrant lock for one owner, or re-enters it (Redisson RLock layout).
-- KEYS[1] lock key: hash of owner field -> hold count; its PTTL is the lease
-- KEYS[2] request key: exists only when cancel-acquire.lua gave this request up
-- ARGV[1] lease: lease to set on the lock key, in milliseconds (integer > 0)
-- ARGV[2] owner: hash field of the owner, `<clientId>:<ownerId>`
-- ARGV[3] expected: hold count the caller believes the owner has before this call (integer >= 0)
-- Returns nil when the owner now holds the lock at count expected + 1 (taken, re-entered, or a
--   replay of this same request that had already been applied; the lease is set either way);
--   an integer >= -1 when another owner holds the lock: its PTTL in milliseconds (-1: no expiry);
--   -3 when the request was cancelled (KEYS[2] exists): nothing is changed;
--   -4 when the owner's hold count is neither expected nor expected + 1 (its hold was lost).
local lockKey = KEYS[1]
local requestKey = KEYS[2]
local lease = tonumber(ARGV[1])
local owner = ARGV[2]
local expected = tonumber(ARGV[3])

if redis.call('exists', requestKey) == 1 then
  return -3
end

local held = tonumber(redis.call('hget', lockKey, owner)) or 0
if held == expected + 1 then
  -- The reply to this request was lost and the caller is asking again: it is already applied.
  redis.call('pexpire', lockKey, lease)
  return nil
end
if held ~= expected then
  return -4
end
if held == 0 and redis.call('exists', lockKey) == 1 then
  return redis.call('pttl', lockKey)
end

redis.call('hincrby', lockKey, owner, 1)
redis.call('pexpire', lockKey, lease)
return nil
