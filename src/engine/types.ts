import type { LockError } from '../errors.js';
import type { ScriptCall } from './script-call.js';

export type { ScriptCall } from './script-call.js';

/**
 * The contract between the engine and a kind of lock. The engine owns waiting, deadlines,
 * aborts, the wait queue's tickets, hand-overs, holds and leases, the watchdog, loss and every
 * retry; a kind supplies its keys, its scripts, and what their replies mean, through one
 * {@link Protocol}. Each call a kind builds is a {@link ScriptCall} that reads its own reply: reply
 * codes are read in the kind's protocol module (or, shared by several kinds, in `replies.ts`) and
 * nowhere else.
 * @internal
 */

/** One lock as the engine sees it: which key, where its frees are announced, and its kind. */
export interface Target {
  /** The name the user gave. */
  readonly name: string;
  /** The lock's Redis key. */
  readonly key: string;
  /** The channel a free of the lock is announced on. */
  readonly channel: string;
  readonly protocol: Protocol;
}

/** A hold as a kind's scripts need it. */
export interface HeldLock {
  readonly name: string;
  readonly key: string;
  readonly channel: string;
  /** The owner's identity in Redis (a hash field or a token). Secret. */
  readonly field: string;
  /** The lease set on every acquire, renewal and partial release, in milliseconds. */
  readonly ttlMs: number;
}

/** What one acquire request carries. */
export interface AcquireRequest {
  readonly target: Target;
  /** The owner's identity in Redis (a hash field or a token). Secret. */
  readonly field: string;
  /** The owner's hold count before this request, as the client knows it. */
  readonly expected: number;
  /** A key that exists only once the request was given up (see `cancelAcquire`). */
  readonly requestKey: string;
  /** Lease to set, in milliseconds. */
  readonly leaseMs: number;
  /** The wait-queue entry to push if the lock is held; empty: not waiting. Kinds with a queue. */
  readonly waiter: string;
  /** The entry an earlier attempt left in the queue; empty: none. Kinds with a queue. */
  readonly queuedAs: string;
  /** How long the wait queue lives after a waiter joins, in milliseconds. */
  readonly queueTtlMs: number;
  /**
   * Whether the acquire may wait: only then may a kind with a queue of its own in Redis (see
   * {@link Protocol.leave}) put the owner in it.
   */
  readonly waiting: boolean;
}

/**
 * What an acquire request found:
 * - `held`: the owner holds the lock at `expected + 1`; `proof` is what the kind adds to the
 *   lease (a fencing token), if anything;
 * - `busy`: another owner holds it for `pttl` ms more (-1: no expiry); `pushed` tells that the
 *   waiter's entry in the queue is now the request's `waiter`, not its `queuedAs`;
 * - `cancelled`: the request had been given up and was refused;
 * - `lost`: the owner's hold count is not what the client knew: its hold was lost;
 * - `refused`: the kind will never grant this request as it stands (a read lock's owner asking
 *   for the write lock): the acquire rejects at once with `error(name)`, nothing changed.
 */
export type AcquireOutcome =
  | { readonly status: 'held'; readonly proof: string | undefined }
  | { readonly status: 'busy'; readonly pttl: number; readonly pushed: boolean }
  | { readonly status: 'cancelled' }
  | { readonly status: 'lost' }
  | { readonly status: 'refused'; readonly error: (name: string) => LockError };

/**
 * What a release found: `partial` — holds remain; `freed` — the lock was freed (or handed on);
 * `absent` — the owner holds nothing (a replay of a last release that was applied, or a lost
 * hold); `changed` — the owner's hold count is not what the client knew.
 */
export type ReleaseOutcome = 'partial' | 'freed' | 'absent' | 'changed';

/** The polling a kind needs when some frees are announced on no channel. */
export interface PollPolicy {
  /** First re-check after a busy reply, in milliseconds; doubled after each busy reply. */
  readonly minMs: number;
  /** Longest time between re-checks, in milliseconds. */
  readonly maxMs: number;
}

/** What a kind whose waiters queue in Redis (and are handed the lock) adds. */
export interface QueueProtocol {
  /**
   * Takes a waiter that gave up out of the queue; with `handed`, also gives back a lock handed
   * to it that it never used.
   */
  withdraw(target: Target, field: string, entry: string, handed: boolean): ScriptCall;
}

/** One kind's keys, scripts and reply meanings. */
export interface Protocol {
  /**
   * The kind's name as telemetry shows it (`lock`, `fenced-lock`, `simple-lock`): public, the
   * same for every lock of the kind.
   */
  readonly kind: string;
  /** Set when waiters queue in Redis and a free hands the lock to the first live one. */
  readonly queue: QueueProtocol | undefined;
  /**
   * Whether a lease of this kind needs the proof its scripts add (a fencing token): a hand-over
   * heard without one (from a release by a client of another kind on the same key) is then
   * confirmed by an acquire, which adds it, instead of being used as it came.
   */
  readonly needsProof: boolean;
  /** Set when some holders (foreign clients) announce nothing: waiters re-check this often. */
  readonly poll: PollPolicy | undefined;
  /**
   * The channel one owner's waiters listen on, for a kind that wakes its waiters one by one (the
   * fair lock names a channel per owner). Default: the target's channel.
   */
  waitChannel?(target: Target, field: string): string;
  /**
   * How many of a client's local waiters on a channel one message wakes, read from the message
   * (a semaphore's count of free permits; `Infinity`: all of them). Default: 1, the first.
   */
  readonly wakes?: (message: string) => number;
  /**
   * Set for a kind that keeps waiters in a queue of its own in Redis and forgets one that stops
   * asking (the fair lock, a waiting writer): every waiter, not only the first of its client,
   * tries again at least this often, in milliseconds, which keeps its place.
   */
  readonly heartbeatMs?: number;
  /**
   * Takes an owner that gave up waiting out of the kind's own queue in Redis, and wakes whoever
   * is next if that changes who may go. Sent after the owner's last attempt, when the acquire
   * ends without the lock.
   */
  leave?(target: Target, field: string): ScriptCall;
  /** Asks for the lock; `retry`: a repeated copy of the request, which may find its own entry. */
  acquire(request: AcquireRequest, retry: boolean): ScriptCall<AcquireOutcome>;
  /** Refuses any late copy of an acquire whose outcome is unknown, and undoes it if applied. */
  cancelAcquire(request: AcquireRequest, recordTtlMs: number): ScriptCall;
  release(hold: HeldLock, expected: number): ScriptCall<ReleaseOutcome>;
  /** Renews many holds of this kind in one call, each to `leaseMs`: per hold, whether it was. */
  renew(holds: readonly HeldLock[], leaseMs: number): ScriptCall<readonly boolean[]>;
  /** Drops a hold given up for lost or on close. */
  abandon(hold: HeldLock): ScriptCall;
  /** Frees the lock whoever holds it: whether there was one. */
  forceRelease(target: Target): ScriptCall<boolean>;
}
