-- Deletes a count-down latch and announces `0`, so that everyone waiting re-reads a count of zero.
-- KEYS[1] latch key: a string holding the count
-- ARGV[1] latch channel: `redisson_countdownlatch__channel__{<latch key>}`
-- Returns 1 when a latch was deleted, 0 when none existed (nothing is published).
local latchKey = KEYS[1]
local channel = ARGV[1]

if redis.call('del', latchKey) == 1 then
  redis.call('publish', channel, '0')
  return 1
end
return 0
