import { LockTimeoutError } from '../../errors.js';
import type { Hold } from '../holds/hold.js';
import type { Lease, LeaseFactory } from '../lease.js';
import type { Unreplicated } from '../replication.js';
import type { Target } from '../types.js';
import { Waiting } from '../wait/loop.js';
import type { WakeReason } from '../wait/waiter.js';
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
export class AcquireCall extends Waiting {
  constructor(
    readonly target: Target,
    readonly field: string,
    /** {@link chainId} of the lock's key and the owner's field. */
    readonly chain: string,
    readonly ttlMs: number,
    readonly watchdog: boolean,
    deadline: number,
    waiting: boolean,
    signal: AbortSignal | undefined,
    /** Whether the call rejects when its wait runs out, rather than resolving null. */
    readonly throwOnTimeout: boolean,
    /** Its place in the lock's wait queue, for kinds that have one. */
    public ticket: Ticket | undefined,
    /** Makes the kind's lease (of the caller's lease type, which the call's promise resolves with). */
    readonly newLease: LeaseFactory<Lease>,
    /** Monotonic time the caller's call started. */
    readonly startedAt: number,
    resume: (call: AcquireCall, reason: WakeReason) => void,
    fail: (call: AcquireCall, error: unknown) => void,
  ) {
    super(deadline, waiting, signal, resume, fail);
  }

  /** An attempt the caller stopped waiting for: what it took must be given back. */
  abandoned: Promise<unknown> | undefined;
  /** Whether it ended holding the lock. */
  acquired = false;
  /** The holder's PTTL in the latest busy reply, in ms (-1: no expiry); undefined before one. */
  lastPttl: number | undefined;
  /** Bound of the next wait for kinds that poll; grows after each attempt. */
  pollMs = Number.POSITIVE_INFINITY;
  /** Settle the caller's promise. */
  resolve: (lease: Lease | null) => void = noop;
  reject: (error: unknown) => void = noop;
}

function noop(): void {}

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
