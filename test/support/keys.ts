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
