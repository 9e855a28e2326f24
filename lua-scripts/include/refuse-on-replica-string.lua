-- refuseOnReplica (include/refuse-on-replica.lua) for a string key, where HDEL is WRONGTYPE.
-- SETRANGE of the empty string writes nothing whether the key holds a string or is missing (it is
-- not created), so on a master nothing changes, is notified or replicated. Unlike HDEL it is
-- refused on a master out of memory (maxmemory reached, no eviction) when it is the script's
-- first write: call it after a script's other writes.
local function refuseOnReplicaString(key)
  redis.call('setrange', key, '0', '')
end
