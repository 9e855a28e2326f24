import { randomBytes } from 'node:crypto';

/**
 * A key prefix no other test (or a second run against the same REDIS_URL) will use, so
 * tests never need to flush a server and never see each other's keys.
 */
export function uniquePrefix(label = 'test'): string {
  return `lk-test-${label}-${randomBytes(4).toString('hex')}-`;
}

/** The wait queue's key of a lock key without a hash tag (latchkey's own, beside Redisson's layout). */
export function queueOf(key: string): string {
  return `latchkey_queue:{${key}}`;
}

/** A fair lock's queue of waiting owners, for a key without a hash tag (Redisson's RFairLock layout). */
export function fairQueueOf(key: string): string {
  return `redisson_lock_queue:{${key}}`;
}

/** A fair lock's waiting owners with the deadline of each, for a key without a hash tag (Redisson's). */
export function fairTimeoutsOf(key: string): string {
  return `redisson_lock_timeout:{${key}}`;
}

/** latchkey's own: a fair lock's waiters' heartbeat deadlines, which Redisson does not read. */
export function fairHeartbeatsOf(key: string): string {
  return `{${key}}:latchkey_heartbeats`;
}
