/**
 * Every Redis key and channel name latchkey uses is built here and nowhere else.
 *
 * Names follow Redisson's so that a Java service using Redisson's RLock and a Node service
 * using latchkey can share a lock. Companion names carry the lock key as a cluster hash tag
 * (`{<key>}`), or the key as it is when it already has one, so they share its slot.
 * @internal
 */

const REQUEST_PREFIX = 'latchkey_request';
const QUEUE_PREFIX = 'latchkey_queue';
const TOKEN_PREFIX = 'redisson_lock_token';

function withSlotOf(prefix: string, key: string): string {
  return key.includes('{') ? `${prefix}:${key}` : `${prefix}:{${key}}`;
}

/** The lock's own key: a hash `owner field -> hold count` whose PTTL is the lease. */
export function lockKey(keyPrefix: string, name: string): string {
  return keyPrefix + name;
}

/** The channel that announces a full release: `redisson_lock__channel:{<key>}`. */
export function unlockChannel(key: string): string {
  return withSlotOf('redisson_lock__channel', key);
}

/**
 * A fenced lock's token counter, `redisson_lock_token:{<key>}` as Redisson's RFencedLock names
 * it: incremented on every acquisition, never expired, so tokens never go back.
 */
export function fencingTokenKey(key: string): string {
  return withSlotOf(TOKEN_PREFIX, key);
}

/**
 * The channel on which latchkey announces that it freed a simple token lock:
 * `latchkey_unlock:{<key>}`. Foreign clients of that layout (redis-py, node-redlock) announce
 * nothing, so latchkey's waiters also re-check on their own.
 */
export function simpleUnlockChannel(key: string): string {
  return withSlotOf('latchkey_unlock', key);
}

/**
 * A short-lived key that makes one acquire or release request idempotent across retries:
 * it records that a release deleted the lock, or that an acquire request was given up.
 */
export function requestKey(key: string, requestId: string): string {
  return `${withSlotOf(REQUEST_PREFIX, key)}:${requestId}`;
}

/**
 * The queue of a lock's waiters: a list in arrival order, read by the scripts that free
 * the lock so they can hand it straight to the next live waiter.
 */
export function waitQueueKey(key: string): string {
  return withSlotOf(QUEUE_PREFIX, key);
}

/**
 * The channel on which one client hears that a lock was handed to one of its waiters. `tag` is
 * a random public id of the client, never its client id.
 */
export function grantChannel(tag: string): string {
  return `latchkey_grant:${tag}`;
}

/**
 * A waiter's member in a wait queue: `<ticket> <lease> <grant channel> <owner field>`. It holds
 * the owner field, so it is as secret as the lock's hash and never leaves Redis or the client.
 */
export function queueMember(ticket: string, leaseMs: number, channel: string, field: string): string {
  return `${ticket} ${leaseMs} ${channel} ${field}`;
}

/**
 * Whether `key` is one of the keys latchkey keeps beside a lock (a request record, a wait queue,
 * a fencing-token counter) rather than a lock itself, so a scan for locks can skip it.
 */
export function isCompanionKey(key: string): boolean {
  return [REQUEST_PREFIX, QUEUE_PREFIX, TOKEN_PREFIX].some((prefix) => key.startsWith(`${prefix}:`));
}

/** The owner's hash field: `<clientId>:<ownerId>`, as Redisson's `<uuid>:<threadId>`. */
export function ownerField(clientId: string, ownerId: string): string {
  return `${clientId}:${ownerId}`;
}
