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
const FOREIGN_PREFIX = 'latchkey_foreign';
const TOKEN_PREFIX = 'redisson_lock_token';
const FAIR_QUEUE_PREFIX = 'redisson_lock_queue';
const FAIR_TIMEOUT_PREFIX = 'redisson_lock_timeout';
const WRITERS_PREFIX = 'latchkey_writers';

// A key with `{` already carries its hash tag (validate.ts lets braces in only as one non-empty
// `{tag}`), as Redisson's `prefixName` takes it.
function withSlotOf(prefix: string, key: string): string {
  return key.includes('{') ? `${prefix}:${key}` : `${prefix}:{${key}}`;
}

/** `{<key>}:<suffix>`, or `<key>:<suffix>` for a key with a hash tag: Redisson's `suffixName`. */
function suffixedInSlotOf(key: string, suffix: string): string {
  return key.includes('{') ? `${key}:${suffix}` : `{${key}}:${suffix}`;
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
 * Beside a lock with a wait queue: how many hand-overs in a row went to the queue while waiters
 * of Redisson's own protocol listened on the lock's channel, or, for a moment, that a free was
 * left to them (lua-scripts/include/foreign-waiters.lua).
 */
export function foreignKey(key: string): string {
  return withSlotOf(FOREIGN_PREFIX, key);
}

/**
 * A channel's presence twin: every latchkey client that listens on `channel` for a lock with a
 * wait queue listens here too (first in, last out), so a script can tell from the two PUBSUB
 * NUMSUB counts whether anyone else listens. Nothing is published on it.
 */
export function presenceChannel(channel: string): string {
  return `latchkey_present:${channel}`;
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

/** A fair lock's queue of waiting owners, in arrival order: `redisson_lock_queue:{<key>}`. */
export function fairQueueKey(key: string): string {
  return withSlotOf(FAIR_QUEUE_PREFIX, key);
}

/**
 * A fair lock's waiting owners with the time (ms since the epoch, by Redis's clock) at which each
 * loses its place, as Redisson's RFairLock counts it: `redisson_lock_timeout:{<key>}`.
 */
export function fairTimeoutKey(key: string): string {
  return withSlotOf(FAIR_TIMEOUT_PREFIX, key);
}

/**
 * A fair lock's latchkey waiters with the time (ms since the epoch, by Redis's clock) at which each
 * loses its place unless it calls again: `{<key>}:latchkey_heartbeats`. Redisson does not read it.
 */
export function fairHeartbeatKey(key: string): string {
  return suffixedInSlotOf(key, 'latchkey_heartbeats');
}

/**
 * The channel on which a fair lock's free is announced to one waiting owner, the next in line:
 * `redisson_lock__channel:{<key>}:<owner field>`, as Redisson's RFairLock names it. It holds the
 * owner field, as Redisson's does, so it is never shown in a message.
 */
export function fairWaiterChannel(key: string, field: string): string {
  return `${unlockChannel(key)}:${field}`;
}

/** The channel of a read-write lock, `redisson_rwlock:{<key>}`: `0` a free, `1` a writer's free. */
export function readWriteChannel(key: string): string {
  return withSlotOf('redisson_rwlock', key);
}

/** The hash field of a read-write lock's writer: `<owner field>:write`, as Redisson writes it. */
export function writerField(field: string): string {
  return `${field}:write`;
}

/**
 * The prefix of one reader's lease keys, `{<key>}:<owner field>:rwlock_timeout`; the script adds
 * `:<n>` for the reader's n-th hold, as Redisson's RReadLock does. Secret: holds the owner field.
 */
export function readerTimeoutPrefix(key: string, field: string): string {
  return suffixedInSlotOf(key, `${field}:rwlock_timeout`);
}

/**
 * Writers waiting for a read-write lock, with the time (ms since the epoch, by Redis's clock) at
 * which each is forgotten unless it asks again: `latchkey_writers:{<key>}`. While one waits, new
 * readers wait too, so a stream of readers cannot starve a writer. latchkey's own: Redisson's
 * readers do not look at it.
 */
export function waitingWritersKey(key: string): string {
  return withSlotOf(WRITERS_PREFIX, key);
}

/** The channel of a semaphore and a permit semaphore, `redisson_sc:{<key>}`: the free count. */
export function semaphoreChannel(key: string): string {
  return withSlotOf('redisson_sc', key);
}

/**
 * A permit semaphore's permits out: a sorted set of permit ids scored by the time (ms since the
 * epoch, by Redis's clock) their leases end, `{<key>}:timeout` as Redisson's
 * RPermitExpirableSemaphore names it.
 */
export function permitTimeoutKey(key: string): string {
  return suffixedInSlotOf(key, 'timeout');
}

/**
 * The channel of a count-down latch, `redisson_countdownlatch__channel__{<key>}`, braces always,
 * as Redisson's RCountDownLatch writes it (no colon): `0` when the count reaches zero, `1` when a
 * new count is set. On a Redis Cluster (`cluster`), a key with a hash tag of its own gets
 * `redisson_countdownlatch__channel:<key>` instead (Redisson's `prefixName` form): braces around
 * it would make a tag of `{<its tag>`, in another slot than the key, where a sharded publish
 * from the latch's scripts would not reach its subscribers. Redisson cannot use such a latch on
 * a cluster at all (its scripts would name keys of two slots), so no interop is lost there.
 */
export function latchChannel(key: string, cluster = false): string {
  return cluster && hasHashTag(key)
    ? `redisson_countdownlatch__channel:${key}`
    : `redisson_countdownlatch__channel__{${key}}`;
}

/**
 * Whether Redis finds a hash tag in `key`: a non-empty text between the first `{` and the first
 * `}` after it. Only that text then decides the key's cluster slot.
 */
export function hasHashTag(key: string): boolean {
  const open = key.indexOf('{');
  if (open === -1) return false;
  const close = key.indexOf('}', open + 1);
  return close > open + 1;
}

/**
 * Whether `key` is one of the keys latchkey keeps beside a lock (a request record, a wait queue,
 * its foreign key, a fencing-token counter, a fair lock's queue and timeouts, waiting writers, a reader's or a
 * permit semaphore's lease keys) rather than a lock itself, so a scan for locks can skip it.
 */
export function isCompanionKey(key: string): boolean {
  return (
    [
      REQUEST_PREFIX,
      QUEUE_PREFIX,
      FOREIGN_PREFIX,
      TOKEN_PREFIX,
      FAIR_QUEUE_PREFIX,
      FAIR_TIMEOUT_PREFIX,
      WRITERS_PREFIX,
    ].some((prefix) => key.startsWith(`${prefix}:`)) ||
    /:rwlock_timeout:\d+$/.test(key) ||
    (key.startsWith('{') && key.endsWith('}:timeout'))
  );
}

/** The owner's hash field: `<clientId>:<ownerId>`, as Redisson's `<uuid>:<threadId>`. */
export function ownerField(clientId: string, ownerId: string): string {
  return `${clientId}:${ownerId}`;
}
