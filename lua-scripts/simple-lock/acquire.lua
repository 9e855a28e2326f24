-- Takes a simple token lock (`SET key token NX PX`, the layout of redis-py's Lock and node-redlock).
-- KEYS[1] lock key: a string holding the holder's random token; its PTTL is the lease
-- KEYS[2] request key: exists only when cancel-acquire.lua gave this request up
-- ARGV[1] token: the random token of this acquisition (secret)
-- ARGV[2] lease: lease to set on the lock key, in milliseconds (integer > 0)
-- Returns nil when the key now holds the token (taken, or a replay of this request that had been
--   applied: the lease is set again);
--   the PTTL of the lock in milliseconds (-1: no expiry) when someone else holds it;
--   -3 when the request was cancelled (KEYS[2] exists): nothing is changed.
local lockKey = KEYS[1]
local requestKey = KEYS[2]
local token = ARGV[1]
local lease = ARGV[2]

local holder = redis.call('get', lockKey)
if holder == token then
  redis.call('pexpire', lockKey, lease)
  return nil
end
if holder then
  return redis.call('pttl', lockKey)
end
if redis.call('exists', requestKey) == 1 then
  return -3
end
redis.call('set', lockKey, token, 'px', lease)
return nil
