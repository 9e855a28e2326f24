-- For an answer a script gives from reads alone that says the owner's hold is gone or not as the
-- caller believes: a write that changes nothing, so the call fails with READONLY on a read-only
-- replica instead. A client that reached a replica (a stale address after a failover) then asks
-- again, and is not told its hold is lost by a node that may not have the latest writes yet. On
-- a master nothing happens: the empty field is never an owner's, so nothing is deleted,
-- notified or replicated.
local function refuseOnReplica(lockKey)
  redis.call('hdel', lockKey, '')
end
