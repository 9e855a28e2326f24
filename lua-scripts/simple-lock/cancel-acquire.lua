-- Gives up a simple-lock acquire whose outcome is unknown: refuses any late replay, undoes it if applied.
-- KEYS[1] lock key
-- KEYS[2] request key of the acquire request being given up
-- ARGV[1] unlock channel: `latchkey_unlock:{<lock key>}`
-- ARGV[2] token: the token the request carried
-- ARGV[3] request TTL: how long KEYS[2] refuses the request, in milliseconds (integer > 0)
-- Returns 1 when the request had been applied and is now undone, 0 when it had not been applied.
local lockKey = KEYS[1]
local requestKey = KEYS[2]
local channel = ARGV[1]
local token = ARGV[2]
local requestTtl = ARGV[3]

redis.call('set', requestKey, '1', 'px', requestTtl)
if redis.call('get', lockKey) ~= token then
  return 0
end
redis.call('del', lockKey)
redis.call('publish', channel, '0')
return 1
