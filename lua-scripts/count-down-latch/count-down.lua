-- Counts a count-down latch down by one, once per request; at zero deletes it and announces it.
-- KEYS[1] latch key: a string holding the count
-- KEYS[2] request key: this request's record, so that a retried copy counts nothing again
-- ARGV[1] latch channel: `redisson_countdownlatch__channel__{<latch key>}`
-- ARGV[2] lifetime of the request record in milliseconds (integer > 0)
-- Returns the count after the request (a replay returns what the first copy returned):
--   > 0 while the latch stays closed;
--   0 when this request brought it to zero: the key is deleted and `0` published on the channel;
--   < 0 when the count already was zero or below (the key is deleted, nothing published);
--   -1 also when no latch existed: nothing is changed, so a late count-down never creates one.
local latchKey = KEYS[1]
local requestKey = KEYS[2]
local channel = ARGV[1]
local recordTtl = ARGV[2]

local recorded = redis.call('get', requestKey)
if recorded then
  return tonumber(recorded)
end

local count = -1
if redis.call('exists', latchKey) == 1 then
  count = redis.call('decr', latchKey)
  if count <= 0 then
    redis.call('del', latchKey)
  end
  if count == 0 then
    redis.call('publish', channel, '0')
  end
end
-- Recorded also when nothing changed: a retried copy must not count down a latch set since.
redis.call('set', requestKey, count, 'px', recordTtl)
return count
