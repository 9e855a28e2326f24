import { LockTimeoutError } from '../../errors.js';
import type { Hold } from '../holds/hold.js';
import type { Lease, LeaseFactory } from '../lease.js';
import type { Unreplicated } from '../replication.js';
import type { Target } from '../types.js';
import type { WaitListener, Waiter, WakeReason } from '../wait/waiter.js';
import type { Ticket } from './ticket.js';

/**
 * An attempt's outcome: a hold (and the kind's proof), the PTTL of another owner's lock, or
 * (with `syncReplicas`) a grant too few replicas acknowledged, which was rolled back.
 */
export type Attempt = Settled | Unreplicated;

/** An attempt that ended with the lock held or busy. */
export type Settled =
  | { readonly hold: Hold; readonly proof: string | undefined }
  | { readonly hold?: undefined; readonly pttl: number };

/**
 * One acquire call: its settings, the state of its wait and what its attempts leave behind,
 * shared by its steps. While it waits, this is all that is kept of it (with its waiter and
 * ticket): no suspended function, so a process can keep many waiting at little cost.
 */
export class AcquireCall implements WaitListener {
  constructor(
    readonly target: Target,
    readonly field: string,
    /** {@link chainId} of the lock's key and the owner's field. */
    readonly chain: string,
    readonly ttlMs: number,
    readonly watchdog: boolean,
    /** Monotonic time at which the wait runs out. */
    readonly deadline: number,
    /** Whether the call may wait (waitMs > 0). */
    readonly waiting: boolean,
    readonly signal: AbortSignal | undefined,
    /** Whether the call rejects when its wait runs out, rather than resolving null. */
    readonly throwOnTimeout: boolean,
    /** Its place in the lock's wait queue, for kinds that have one. */
    public ticket: Ticket | undefined,
    /** Makes the kind's lease (of the caller's lease type, which the call's promise resolves with). */
    readonly newLease: LeaseFactory<Lease>,
    /** Monotonic time the caller's call started. */
    readonly startedAt: number,
    /** Goes on with the wait after a wake-up (the acquirer's). */
    readonly resume: (call: AcquireCall, reason: WakeReason) => void,
    /** Ends the call with an error (the acquirer's). */
    readonly fail: (call: AcquireCall, error: unknown) => void,
  ) {}

  /** An attempt the caller stopped waiting for: what it took must be given back. */
  abandoned: Promise<unknown> | undefined;
  /** Its place in the local queue of the lock's channel, once it waits. */
  waiter: Waiter | undefined;
  /** Whether it ended holding the lock. */
  acquired = false;
  /** When the lock is expected to expire, as far as this waiter knows (monotonic). */
  expiresAt = Number.POSITIVE_INFINITY;
  /** The holder's PTTL in the latest busy reply, in ms (-1: no expiry); undefined before one. */
  lastPttl: number | undefined;
  /** Bound of the next wait for kinds that poll; grows after each attempt. */
  pollMs = Number.POSITIVE_INFINITY;
  /** Whether to try at once rather than wait first. */
  tryNow = false;
  /** The waiter's generation when the attempt in flight was sent. */
  generation = 0;
  /** Settle the caller's promise. */
  resolve: (lease: Lease | null) => void = noop;
  reject: (error: unknown) => void = noop;

  /**
   * See {@link WaitListener}: the wait goes on in a microtask, once whatever woke it (a message
   * handler, a timer, another waiter leaving) has returned, as after an awaited promise.
   */
  woken(reason: WakeReason): void {
    void SETTLED.then(() => this.resume(this, reason));
  }

  failed(error: unknown): void {
    void SETTLED.then(() => this.fail(this, error));
  }
}

function noop(): void {}

/**
 * A settled promise whose reactions are the wait loop's next steps: a microtask as
 * `queueMicrotask` makes one, in the same order, without its per-call async resource.
 */
export const SETTLED: Promise<void> = Promise.resolve();

/** Resolves the call with `lease` or, if `failed`, rejects it with `failure`. */
export function settle(
  call: AcquireCall,
  lease: Lease | null | undefined,
  failed: boolean,
  failure: unknown,
): void {
  if (failed) call.reject(failure);
  else call.resolve(lease ?? null);
}

/**
 * How long the caller has waited, for a message: a call that gives up says its own time, not
 * only that of its last try.
 */
export function sinceStart(call: AcquireCall): string {
  return `after ${Math.round(performance.now() - call.startedAt)} ms`;
}

/** An acquire whose wait ran out: null, or a rejection for a caller that wants one. */
export function noLease(call: AcquireCall): null {
  if (!call.throwOnTimeout) return null;
  const { lastPttl } = call;
  const holder =
    lastPttl === undefined
      ? ''
      : `: at the last try another owner held it, ${lastPttl < 0 ? 'with no expiry' : `with ${lastPttl} ms of its lease left`}`;
  throw new LockTimeoutError(`Timed out ${sinceStart(call)} waiting for lock "${call.target.name}"${holder}`);
}
