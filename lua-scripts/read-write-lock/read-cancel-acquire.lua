-- Gives up a read acquire whose outcome is unknown: refuses any late replay, undoes it if applied.
-- KEYS[1] lock key
-- KEYS[2] request key of the acquire request being given up
-- KEYS[3] lease prefix: `{<lock key>}:<owner>:rwlock_timeout`
-- ARGV[1] channel: `redisson_rwlock:{<lock key>}`
-- ARGV[2] owner: the owner's reader field
-- ARGV[3] expected: the `expected` the request carried (read count before it, integer >= 0)
-- ARGV[4] request TTL: how long KEYS[2] refuses the request, in milliseconds (integer > 0)
-- Returns 1 when the request had been applied and is now undone (its hold and lease key dropped,
--   the lock freed with `0` published if nobody is left), 0 when it had not been applied.
local lockKey = KEYS[1]
local requestKey = KEYS[2]
local leasePrefix = KEYS[3]
local channel = ARGV[1]
local owner = ARGV[2]
local expected = tonumber(ARGV[3])
local requestTtl = ARGV[4]

-- @include read-write-lock

redis.call('set', requestKey, '1', 'px', requestTtl)
local held = tonumber(redis.call('hget', lockKey, owner)) or 0
if held ~= expected + 1 then
  return 0
end
dropReadHold(lockKey, leasePrefix, owner, held)
afterReaderChange(lockKey, leaseBase(leasePrefix, owner), channel)
return 1
