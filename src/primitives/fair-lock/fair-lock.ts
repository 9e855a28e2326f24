import {
  CONTEXT_OWNERS,
  hashHoldCount,
  LockHandle,
  plainLease,
  type Engine,
  type Lease,
} from '../../engine/index.js';
import { lockKey, ownerField, unlockChannel } from '../../keys.js';
import type { FairLockOptions } from '../../options.js';
import { checkBoolean, checkDuration, checkOptions } from '../../validate.js';
import { fairLockProtocol } from './protocol.js';

const FAIR_LOCK_OPTIONS = ['reentrant', 'waiterTimeoutMs', 'waitStepMs'] as const;

/**
 * How long a waiting owner keeps its place after each of its calls, by default. Waiters call
 * again every third of it, so 10 s costs each waiter one small script call about every 3.3 s,
 * rides out event-loop stalls and GC pauses of several seconds, and bounds what a dead or frozen
 * waiter at the head costs the line to about 13 s (Redisson's 5 minutes is the opposite trade).
 */
const DEFAULT_WAITER_TIMEOUT_MS = 10_000;
/** Below this, a waiter's calls (a third of it apart) would crowd Redis for little gain. */
const MIN_WAITER_TIMEOUT_MS = 30;
/** Redisson's `fairLockWaitTimeout` by default: RFairLock's threadWaitTime, 5 minutes. */
const DEFAULT_WAIT_STEP_MS = 300_000;

/**
 * A reentrant lock granted in the order its waiters asked, across processes: Redisson's RFairLock,
 * on the same keys and channels, so a Java service on Redisson and a Node service on latchkey wait
 * in one line. Get one from {@link LockClient.fairLock}.
 *
 * A release wakes only the owner next in line, on its own channel. The line's deadlines follow
 * RFairLock's arithmetic with `waitStepMs` as its threadWaitTime, so Redisson and latchkey waiters
 * keep their order in one line. A waiting owner keeps its place by asking again (latchkey does it
 * for it, every third of `waiterTimeoutMs`); one that dies or freezes loses its place once it
 * heads the line with its time run out, so it holds the line up for at most about
 * `waiterTimeoutMs` plus one call interval of the owner behind it (a line left to Redisson clients
 * alone drops it by RFairLock's deadline instead, within about `waitStepMs`). An owner that loses
 * its place and comes back joins at the back. `tryAcquire()` without `waitMs` never joins the
 * line, and never takes the lock ahead of someone in it.
 *
 * The owner is the async context, as for {@link Lock}; `{ reentrant: false }` gives every
 * acquisition an owner of its own (Redisson's non-reentrant fair lock).
 *
 * @example
 * ```ts
 * const settlements = locks.fairLock('settlements:eu');
 * await settlements.withLock(async (lease) => {
 *   await settleNextBatch({ signal: lease.signal });
 * });
 * ```
 */
export class FairLock extends LockHandle<Lease> {
  /** How long a waiting owner keeps its place after each of its calls, in milliseconds. */
  readonly waiterTimeoutMs: number;
  /** RFairLock's threadWaitTime the line's deadlines are counted in, in milliseconds. */
  readonly waitStepMs: number;

  /** @internal Use {@link LockClient.fairLock}; `options` are checked here. */
  constructor(engine: Engine, keyPrefix: string, name: string, options: FairLockOptions | undefined) {
    const given = checkOptions('options', options, FAIR_LOCK_OPTIONS);
    const reentrant = given.reentrant === undefined ? true : checkBoolean('reentrant', given.reentrant);
    const waiterTimeoutMs =
      given.waiterTimeoutMs === undefined
        ? DEFAULT_WAITER_TIMEOUT_MS
        : checkDuration('waiterTimeoutMs', given.waiterTimeoutMs, MIN_WAITER_TIMEOUT_MS);
    const waitStepMs =
      given.waitStepMs === undefined
        ? DEFAULT_WAIT_STEP_MS
        : checkDuration('waitStepMs', given.waitStepMs, 1);
    const key = lockKey(keyPrefix, name);
    super(
      engine,
      { name, key, channel: unlockChannel(key), protocol: fairLockProtocol(waiterTimeoutMs, waitStepMs) },
      reentrant ? CONTEXT_OWNERS.reentrant : CONTEXT_OWNERS.exclusive,
      plainLease,
    );
    this.waiterTimeoutMs = waiterTimeoutMs;
    this.waitStepMs = waitStepMs;
  }

  /**
   * How many times the calling async context holds the lock (0 when it does not). One round
   * trip for a reentrant lock; for a non-reentrant one, 1 or 0 from this client's own state.
   * @example
   * ```ts
   * await settlements.withLock(async () => {
   *   console.log(await settlements.holdCount()); // 1
   * });
   * ```
   */
  holdCount(): Promise<number> {
    return hashHoldCount(this.engine, this.key, this.name, this.heldByContext(), (ownerId) =>
      ownerField(this.engine.clientId, ownerId),
    );
  }
}
