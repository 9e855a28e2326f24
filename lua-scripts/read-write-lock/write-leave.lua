-- Takes a writer that gave up waiting out of the waiting writers, so new readers may come in.
-- KEYS[1] waiting writers: zset `<writer field> -> ms since the epoch (Redis TIME) it lapses at`
-- ARGV[1] channel: `redisson_rwlock:{<lock key>}`
-- ARGV[2] writer: the writer field of the owner that gave up
-- Returns 1 when the writer was waiting and is removed (`1` is published when no live writer is
--   left waiting, so readers blocked by it try again), 0 when it was not there.
local writersKey = KEYS[1]
local channel = ARGV[1]
local writer = ARGV[2]

-- @include read-write-lock

if redis.call('zrem', writersKey, writer) == 0 then
  return 0
end
redis.call('zremrangebyscore', writersKey, '-inf', string.format('%d', redisNowMs()))
if redis.call('zcard', writersKey) == 0 then
  redis.call('publish', channel, '1')
end
return 1
