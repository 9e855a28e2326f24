/**
 * The lock kinds a LockClient hands out, as tests see them: one fixture per kind, so a test of
 * behaviour every kind shares is written once and run per kind with `describe.each(KINDS)`.
 *
 * A fixture says how to get a handle, which renewal script the watchdog calls (for fixtures
 * that watch it), where the kind announces a free lock, which keys it keeps without expiry,
 * what the kind can do (re-entry, fencing tokens, hand-over to queued waiters), and how to look
 * at the lock in Redis without showing an owner's secret (a hash field or a token): its type,
 * PTTL, how many owners it records, their hold counts, and a digest that changes when anything
 * in it changes.
 *
 * Channel and key names are spelt out here rather than taken from src/keys.ts, so a renamed
 * one fails the tests. They assume a lock key without a hash tag, as the tests' keys are.
 */
import { createHash } from 'node:crypto';
import { FencedLease, type Lease, type LockClient, type LockHandle } from '../../src/index.js';
import type { luaScripts } from '../../src/scripts/generated.js';
import type { Redis } from './resources.js';

export type KindName =
  'lock' | 'fencedLock' | 'simpleLock' | 'fairLock' | 'permitSemaphore' | 'readLock' | 'writeLock';

/** A handle of any kind; its leases are at least a {@link Lease}. */
export type KindHandle = LockHandle<Lease>;

/** A lock in Redis, summed up without its owners. */
export interface LockSnapshot {
  /** TYPE of the key: `hash` (lock, fencedLock, readLock, writeLock), `string` (simpleLock) or `none`. */
  readonly type: string;
  /** PTTL of the key: -2 when it does not exist, -1 when it never expires. */
  readonly pttl: number;
  /**
   * How many owners Redis records: hash fields (but a read-write lock's `mode`), or 1 for a simple
   * lock's key that exists.
   */
  readonly owners: number;
  /** The owners' hold counts, smallest first: hash kinds only ([] for the simple lock). */
  readonly counts: readonly number[];
  /** SHA-256 of the contents (sorted hash entries, or the string): equal while nothing changed. */
  readonly digest: string;
}

export interface Kind {
  readonly name: KindName;
  /** TYPE of the lock's key while it is held. */
  readonly keyType: 'hash' | 'string';
  /** The context that holds the lock may take it again (hold counts in a hash). */
  readonly reentrant: boolean;
  /** Leases carry a fencing token that grows with every acquisition. */
  readonly fenced: boolean;
  /** Waiters queue in Redis and a release hands the lock to the first live one. */
  readonly handsOver: boolean;
  /**
   * Each waiting owner listens on a channel of its own (the fair lock), so a client has one
   * subscription per waiting owner rather than one per lock.
   */
  readonly channelPerOwner: boolean;
  /** The operator CLI (`latchkey inspect`, `watch`, `force-unlock`) knows this kind's layout. */
  readonly cli: boolean;
  /**
   * Holders of this kind exclude each other: one owner at a time. False for a read lock, which
   * any number of owners hold at once (it excludes writers, not other readers), so a test that
   * checks that a second owner waits or never holds beside the first skips it.
   */
  readonly exclusive: boolean;
  /** The luaScripts entry the watchdog calls to renew holds of this kind. */
  readonly renewScript: keyof typeof luaScripts;
  /** A handle on the lock `name`. */
  handle(locks: LockClient, name: string): KindHandle;
  /**
   * The channel on which latchkey announces that the lock with key `key` is free. For a kind that
   * wakes each waiting owner on a channel of its own (the fair lock), a pattern (`*`) matching
   * all of them: `TestResources.numsub` sums the subscribers of every channel it matches.
   */
  channel(key: string): string;
  /**
   * The keys besides the lock's own that the kind keeps without expiry on purpose: the fenced
   * lock's token counter, `redisson_lock_token:{<key>}`, which must never go back.
   */
  lastingKeys(key: string): readonly string[];
  /** The lock's state in Redis, read in one MULTI. */
  inspect(redis: Redis, key: string): Promise<LockSnapshot>;
  /** The fencing token of a lease of this kind; undefined for a kind without tokens. */
  tokenOf(lease: Lease): bigint | undefined;
}

function digestOf(value: unknown): string {
  return createHash('sha256').update(JSON.stringify(value)).digest('hex');
}

async function inspectHash(redis: Redis, key: string): Promise<LockSnapshot> {
  const [type, pttl, hash] = await redis.multi().type(key).pTTL(key).hGetAll(key).execTyped();
  const entries = Object.entries(hash).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return {
    type: String(type),
    pttl: Number(pttl),
    owners: entries.length,
    counts: entries.map(([, count]) => Number(count)).sort((a, b) => a - b),
    digest: digestOf(entries),
  };
}

/** A read-write lock's hash: `mode` is not an owner, and its value is not a hold count. */
async function inspectReadWrite(redis: Redis, key: string): Promise<LockSnapshot> {
  const [type, pttl, hash] = await redis.multi().type(key).pTTL(key).hGetAll(key).execTyped();
  const entries = Object.entries(hash).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const holders = entries.filter(([field]) => field !== 'mode');
  return {
    type: String(type),
    pttl: Number(pttl),
    owners: holders.length,
    counts: holders.map(([, count]) => Number(count)).sort((a, b) => a - b),
    digest: digestOf(entries),
  };
}

async function inspectString(redis: Redis, key: string): Promise<LockSnapshot> {
  const [type, pttl, value] = await redis.multi().type(key).pTTL(key).get(key).execTyped();
  return {
    type: String(type),
    pttl: Number(pttl),
    owners: value === null ? 0 : 1,
    counts: [],
    digest: digestOf(value),
  };
}

function redissonChannel(key: string): string {
  return `redisson_lock__channel:{${key}}`;
}

function noToken(): undefined {
  return undefined;
}

function none(): readonly string[] {
  return [];
}

export const LOCK: Kind = {
  name: 'lock',
  keyType: 'hash',
  reentrant: true,
  fenced: false,
  handsOver: true,
  channelPerOwner: false,
  cli: true,
  exclusive: true,
  renewScript: 'lock/renew',
  handle: (locks, name) => locks.lock(name),
  channel: redissonChannel,
  lastingKeys: none,
  inspect: inspectHash,
  tokenOf: noToken,
};

export const FENCED_LOCK: Kind = {
  name: 'fencedLock',
  keyType: 'hash',
  reentrant: true,
  fenced: true,
  handsOver: true,
  channelPerOwner: false,
  cli: true,
  exclusive: true,
  // The fenced lock keeps the reentrant lock's hash, so the same script renews it.
  renewScript: 'lock/renew',
  handle: (locks, name) => locks.fencedLock(name),
  channel: redissonChannel,
  lastingKeys: (key) => [`redisson_lock_token:{${key}}`],
  inspect: inspectHash,
  tokenOf: (lease) => {
    if (!(lease instanceof FencedLease)) throw new Error(`a lease of "${lease.name}" without a token`);
    return lease.token;
  },
};

export const SIMPLE_LOCK: Kind = {
  name: 'simpleLock',
  keyType: 'string',
  reentrant: false,
  fenced: false,
  handsOver: false,
  channelPerOwner: false,
  cli: true,
  exclusive: true,
  renewScript: 'simple-lock/renew',
  handle: (locks, name) => locks.simpleLock(name),
  channel: (key) => `latchkey_unlock:{${key}}`,
  lastingKeys: none,
  inspect: inspectString,
  tokenOf: noToken,
};

export const FAIR_LOCK: Kind = {
  name: 'fairLock',
  keyType: 'hash',
  reentrant: true,
  fenced: false,
  // Waiters are served from Redisson's queue in Redis; a release hands nothing over.
  handsOver: false,
  channelPerOwner: true,
  cli: true,
  exclusive: true,
  // The fair lock keeps the reentrant lock's hash, so the same script renews it.
  renewScript: 'lock/renew',
  handle: (locks, name) => locks.fairLock(name),
  // Each waiting owner listens on `redisson_lock__channel:{<key>}:<owner field>`.
  channel: (key) => `${redissonChannel(key)}:*`,
  // Its queue and deadlines expire on their own once nobody waits.
  lastingKeys: none,
  inspect: inspectHash,
  tokenOf: noToken,
};

/**
 * A permit semaphore's state: the counter of free permits at the key (a string, kept without
 * expiry) and the permits out in `{<key>}:timeout` (id -> end of lease, by Redis's clock). Its
 * owners are the permits out whose leases have not ended; its PTTL the time until the earliest of their leases ends (-2 when
 * none is out); its type the counter's while a permit is out, `none` otherwise, as a free lock's.
 */
async function inspectPermits(redis: Redis, key: string): Promise<LockSnapshot> {
  const timeoutKey = `{${key}}:timeout`;
  const [type, free, permits, time] = await redis
    .multi()
    .type(key)
    .get(key)
    .zRangeWithScores(timeoutKey, 0, -1)
    .time()
    .execTyped();
  const nowMs = Number(time[0]) * 1_000 + Math.floor(Number(time[1]) / 1_000);
  // A permit whose lease ended is held by nobody: the next script of any client gives it back.
  const live = permits.filter((permit) => permit.score > nowMs);
  const scores = live.map((permit) => permit.score).sort((a, b) => a - b);
  const earliest = scores[0];
  return {
    type: live.length > 0 ? String(type) : 'none',
    pttl: earliest === undefined ? -2 : Math.max(0, Math.round(earliest - nowMs)),
    owners: live.length,
    counts: [],
    // Who holds, and how many are free: not until when, as a hash lock's digest leaves out its PTTL.
    digest: digestOf([free, live.map((permit) => permit.value).sort()]),
  };
}

/** A permit semaphore of one permit, so that it excludes as a lock does. */
export const PERMIT_SEMAPHORE: Kind = {
  name: 'permitSemaphore',
  keyType: 'string',
  reentrant: false,
  fenced: false,
  handsOver: false,
  cli: true,
  channelPerOwner: false,
  exclusive: true,
  renewScript: 'permit-semaphore/renew',
  handle: (locks, name) => locks.permitSemaphore(name, { permits: 1 }),
  channel: (key) => `redisson_sc:{${key}}`,
  // The counter of free permits is the semaphore's state, shared with Redisson: it has no TTL.
  lastingKeys: (key) => [key],
  inspect: inspectPermits,
  tokenOf: noToken,
};

/** Redisson's read-write lock channel, `redisson_rwlock:{<key>}`: both halves share it. */
function readWriteChannel(key: string): string {
  return `redisson_rwlock:{${key}}`;
}

/**
 * The read half of a read-write lock: reentrant, no hand-over, and shared — any number of owners
 * hold it at once, so tests of exclusion among holders of one kind skip it.
 */
export const READ_LOCK: Kind = {
  name: 'readLock',
  keyType: 'hash',
  reentrant: true,
  fenced: false,
  handsOver: false,
  exclusive: false,
  cli: true,
  channelPerOwner: false,
  renewScript: 'read-write-lock/read-renew',
  handle: (locks, name) => locks.readWriteLock(name).readLock(),
  channel: readWriteChannel,
  lastingKeys: none,
  inspect: inspectReadWrite,
  tokenOf: noToken,
};

/** The write half of a read-write lock: reentrant, exclusive, no hand-over. */
export const WRITE_LOCK: Kind = {
  name: 'writeLock',
  keyType: 'hash',
  reentrant: true,
  fenced: false,
  handsOver: false,
  exclusive: true,
  cli: true,
  channelPerOwner: false,
  renewScript: 'read-write-lock/write-renew',
  handle: (locks, name) => locks.readWriteLock(name).writeLock(),
  channel: readWriteChannel,
  lastingKeys: none,
  inspect: inspectReadWrite,
  tokenOf: noToken,
};

export const KINDS: readonly Kind[] = [
  LOCK,
  FENCED_LOCK,
  SIMPLE_LOCK,
  FAIR_LOCK,
  PERMIT_SEMAPHORE,
  READ_LOCK,
  WRITE_LOCK,
];

/** The kinds the operator CLI knows. */
export const CLI_KINDS: readonly Kind[] = KINDS.filter((kind) => kind.cli);

/** The kind called `name` (for worker fixtures, which get it from their environment). */
export function kindNamed(name: string): Kind {
  const kind = KINDS.find((candidate) => candidate.name === name);
  if (kind === undefined) {
    throw new Error(`unknown lock kind "${name}"; expected one of ${KINDS.map((k) => k.name).join(', ')}`);
  }
  return kind;
}
