import { randomBytes } from 'node:crypto';

/**
 * A key prefix no other test (or a second run against the same REDIS_URL) will use, so
 * tests never need to flush a server and never see each other's keys.
 */
export function uniquePrefix(label = 'test'): string {
  return `lk-test-${label}-${randomBytes(4).toString('hex')}-`;
}
