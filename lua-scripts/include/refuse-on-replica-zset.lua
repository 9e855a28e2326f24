-- refuseOnReplica (include/refuse-on-replica.lua) for a sorted set: ZREM of the empty member,
-- which no entry has, so on a master nothing is removed, notified or replicated, and a missing
-- key is not created.
local function refuseOnReplicaZset(key)
  redis.call('zrem', key, '')
end
