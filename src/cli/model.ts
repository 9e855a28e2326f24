/**
 * The CLI's picture of a key (its kind, holders, queue and permits) and the holder labels, apart
 * from the reading (snapshot.ts) and the layouts that fill them in (layouts/), which both use them.
 */
import { createHmac, randomBytes } from 'node:crypto';

/**
 * What a key holds, as the CLI tells it (src/cli/layouts has one entry per kind):
 * - `lock`: a hash of owner fields `<uuid>:<n>` -> hold count (latchkey's Lock, Redisson's RLock;
 *   also a fair lock that nobody is queued for, which looks the same);
 * - `fenced-lock`: the same, with a fencing-token counter beside it (FencedLock, RFencedLock);
 * - `fair-lock`: the same, with a fair queue beside it (FairLock, RFairLock);
 * - `read-write-lock`: a hash with a `mode` field, reader and writer fields (RReadWriteLock);
 * - `simple-lock`: a string token, as `SET NX PX` locks write it (SimpleLock, redis-py, node-redlock);
 * - `permit-semaphore`: a counter with permits out in `{<key>}:timeout` (RPermitExpirableSemaphore);
 * - `semaphore`: a counter of free permits (RSemaphore, or a permit semaphore with no permit out);
 * - `count-down-latch`: a counter of count-downs still to come (RCountDownLatch);
 * - `counter`: a number that may be any of several kinds (see `candidates`);
 * - `free`: no key;
 * - `not-a-lock`: a key of another type, or whose contents fit no kind.
 * @internal
 */
export type LockKind =
  | 'lock'
  | 'fenced-lock'
  | 'fair-lock'
  | 'read-write-lock'
  | 'simple-lock'
  | 'permit-semaphore'
  | 'semaphore'
  | 'count-down-latch'
  | 'counter'
  | 'free'
  | 'not-a-lock';

/** What a holder holds: a hash lock's owner, a reader, a writer, a permit, a simple lock's token. */
export type HolderRole = 'owner' | 'reader' | 'writer' | 'permit' | 'token';

/** One holder. @internal */
export interface Holder {
  /**
   * 8 hex digits of an HMAC of the owner field (or permit id) under a key drawn at random for
   * each run: the same owner has the same label within one run (so `watch` shows who changed),
   * and the label means nothing outside it. A writer and its own read holds share a label. Null
   * for a simple lock, whose holder is just "held".
   */
  readonly label: string | null;
  readonly holdCount: number;
  readonly role: HolderRole;
  /**
   * The time left on this holder's own lease, in milliseconds: a reader's (the longest of its
   * holds', read with `inspect` only) or a permit's. Null when the holder's lease is the key's
   * TTL, when it never ends, or when it was not read.
   */
  readonly leaseMs: number | null;
}

/** One entry of a wait queue; the owner field it holds is never read out. @internal */
export interface Waiter {
  /** 1 for the waiter that is served next. */
  readonly position: number;
  /** The lease the waiter asked for, in milliseconds (latchkey's queue); null when not recorded. */
  readonly leaseMs: number | null;
  /**
   * A fair lock's waiter: milliseconds until it loses its place unless it asks again (<= 0: lost
   * already, dropped by the next call); null for another queue or an entry without a deadline.
   */
  readonly deadlineMs: number | null;
  /** Whether the waiter's client still listens for its wake-up; a dead entry is skipped. */
  readonly listening: boolean | null;
}

/** A semaphore's permits. @internal */
export interface Permits {
  /** The counter of free permits; null when it does not exist. */
  readonly free: number | null;
  /** Permits out under an id whose lease has not ended (permit semaphore; 0 for a semaphore). */
  readonly out: number;
  /** Permits out whose lease ended: given back by the semaphore's next call of any client. */
  readonly lapsed: number;
}

/** A key as read at one instant (one MULTI; reader leases and listeners right after). @internal */
export interface Snapshot {
  readonly name: string;
  readonly key: string;
  readonly kind: LockKind;
  /** For a `counter`: the kinds it may be; else empty. */
  readonly candidates: readonly LockKind[];
  /** Redis records a holder: a lock's owner, a reader or writer, a permit out. */
  readonly held: boolean;
  readonly holders: readonly Holder[];
  /** PTTL in milliseconds (a permit semaphore: the earliest lease's end); null when none. */
  readonly ttlMs: number | null;
  /** The last fencing token issued, as a decimal string; null when the lock was never fenced. */
  readonly fencingToken: string | null;
  /** A read-write lock's mode; null for other kinds. */
  readonly mode: 'read' | 'write' | null;
  /** A semaphore's or permit semaphore's permits; null for other kinds. */
  readonly permits: Permits | null;
  /** A count-down latch's count, or a `counter`'s value; null for other kinds. */
  readonly count: number | null;
  /** Length of the wait queue (fair queue; waiting writers of a read-write lock). */
  readonly waiting: number;
  /** The first {@link MAX_WAITERS_SHOWN} entries of the queue (with `details`), else none. */
  readonly waiters: readonly Waiter[];
  /** What TYPE answered: `hash`, `string`, `none`, or another type. */
  readonly redisType: string;
}

/**
 * Labels owner fields and permit ids without revealing them. A keyed hash under a key drawn once
 * per run: a label printed in a ticket or a log cannot be matched against an owner field leaked
 * elsewhere, and two runs' labels cannot be linked. @internal
 */
export class HolderLabels {
  readonly #key = randomBytes(32);

  label(field: string | Buffer): string {
    return createHmac('sha256', this.#key).update(field).digest('hex').slice(0, 8);
  }
}
