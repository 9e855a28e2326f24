-- Sets a count-down latch's count when no latch exists, and announces the new count.
-- KEYS[1] latch key: a string holding the count
-- KEYS[2] request key: this request's record, so that a retried copy answers as the first did
-- ARGV[1] latch channel: `redisson_countdownlatch__channel__{<latch key>}`
-- ARGV[2] count: the count to set (integer >= 1)
-- ARGV[3] lifetime of the latch key in milliseconds (integer >= 1), or 0 for none
-- ARGV[4] lifetime of the request record in milliseconds (integer > 0)
-- Returns 1 when the count was set and `1` published on the channel (also for a replay of a
--   request that set it); 0 when a latch already existed: nothing is changed.
local latchKey = KEYS[1]
local requestKey = KEYS[2]
local channel = ARGV[1]
-- Handed on to Redis as the caller's text: Redis would format a Lua number with sprintf.
local count = ARGV[2]
local ttl = ARGV[3]
local recordTtl = ARGV[4]

local recorded = redis.call('get', requestKey)
if recorded then
  return tonumber(recorded)
end

local outcome = 0
if redis.call('exists', latchKey) == 0 then
  if ttl == '0' then
    redis.call('set', latchKey, count)
  else
    redis.call('set', latchKey, count, 'px', ttl)
  end
  redis.call('publish', channel, '1')
  outcome = 1
end
redis.call('set', requestKey, outcome, 'px', recordTtl)
return outcome
