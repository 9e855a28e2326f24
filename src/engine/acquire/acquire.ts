import { redisError, type Calls } from '../calls.js';
import { chainId, type OperationChains } from '../chains.js';
import type { Events } from '../events.js';
import type { Hold } from '../holds/hold.js';
import type { Holds } from '../holds/holds.js';
import type { Lease, LeaseFactory, LeaseHost } from '../lease.js';
import type { Telemetry } from '../telemetry.js';
import { within } from '../timing.js';
import type { Target } from '../types.js';
import type { Notifications } from '../wait/channels.js';
import { SETTLED, WaitLoop } from '../wait/loop.js';
import { AcquireCall, settle, sinceStart } from './call.js';
import { WaitQueue } from './hand-over.js';
import { Ticket } from './ticket.js';
import { HoldWaits, type HoldWaitSettings } from './hold-waits.js';

/**
 * How long an aborted acquire waits for its clean-up (withdrawing its waiter, giving back what
 * an attempt in flight took) before it rejects; the clean-up goes on after that.
 * @internal
 */
export const ABORT_CLEANUP_GRACE_MS = 50;

/** @internal */
export interface AcquirerSettings extends HoldWaitSettings {
  readonly watchdogTimeoutMs: number;
  readonly isClosed: () => boolean;
}

/** The parts of the engine an acquire works with. @internal */
export interface AcquirerParts {
  readonly calls: Calls;
  readonly chains: OperationChains;
  readonly holds: Holds;
  readonly notifications: Notifications;
  readonly events: Events;
  readonly leaseHost: LeaseHost;
  readonly telemetry: Telemetry;
}

/**
 * The acquire every hold kind shares: starts the call and its wait (the {@link WaitLoop} with
 * {@link HoldWaits}: try;
 * when the lock is held, queue (kinds with a wait queue) and subscribe; wake on an unlock
 * message, a hand-over, the holder's expiry or a poll), hands out the kind's lease, and gives up
 * at the deadline or on abort, leaving no queue entry and no hold behind.
 * @internal
 */
export class Acquirer {
  readonly #settings: AcquirerSettings;
  readonly #calls: Calls;
  readonly #chains: OperationChains;
  readonly #holds: Holds;
  readonly #notifications: Notifications;
  readonly #events: Events;
  readonly #leaseHost: LeaseHost;
  readonly #telemetry: Telemetry;
  readonly #queue: WaitQueue;
  readonly #waits: HoldWaits;
  readonly #loop: WaitLoop<AcquireCall>;

  constructor(settings: AcquirerSettings, parts: AcquirerParts) {
    this.#settings = settings;
    this.#calls = parts.calls;
    this.#chains = parts.chains;
    this.#holds = parts.holds;
    this.#notifications = parts.notifications;
    this.#events = parts.events;
    this.#leaseHost = parts.leaseHost;
    this.#telemetry = parts.telemetry;
    this.#queue = new WaitQueue(parts.calls, parts.chains, parts.holds, settings.assertOpen);
    this.#waits = new HoldWaits(
      settings,
      { ...parts, queue: this.#queue },
      {
        handOut: (call, taken) => this.#handOut(call, taken),
        end: (call, lease) => this.#end(call, lease),
        fail: this.#fail,
      },
    );
    this.#loop = new WaitLoop(parts.notifications, this.#waits, settings.assertOpen);
  }

  /** See {@link WaitQueue.onGrant}. */
  get onGrant(): (message: string) => void {
    return this.#queue.onGrant;
  }

  /**
   * Takes `target` for the owner `field`, waiting up to `waitMs` from `startedAt` (the start of
   * the caller's call, by the monotonic clock); resolves null when the wait runs out, or rejects
   * with a {@link LockTimeoutError} then if `throwOnTimeout` is set. Rejects with `signal.reason`
   * on abort, at once, whatever is in flight.
   */
  acquire<L extends Lease>(
    target: Target,
    field: string,
    waitMs: number,
    leaseMs: number | undefined,
    signal: AbortSignal | undefined,
    newLease: LeaseFactory<L>,
    throwOnTimeout = false,
    startedAt = performance.now(),
  ): Promise<L | null> {
    const telemetry = this.#telemetry;
    if (!telemetry.enabled) {
      return this.#acquire(target, field, waitMs, leaseMs, signal, newLease, throwOnTimeout, startedAt);
    }
    return telemetry.acquire(target, waitMs, signal, startedAt, () =>
      this.#acquire(target, field, waitMs, leaseMs, signal, newLease, throwOnTimeout, startedAt),
    );
  }

  #acquire<L extends Lease>(
    target: Target,
    field: string,
    waitMs: number,
    leaseMs: number | undefined,
    signal: AbortSignal | undefined,
    newLease: LeaseFactory<L>,
    throwOnTimeout: boolean,
    startedAt: number,
  ): Promise<L | null> {
    const ttlMs = leaseMs ?? this.#settings.watchdogTimeoutMs;
    const chain = chainId(target.key, field);
    // Only an acquire that may wait joins the queue, and only once this client listens for
    // hand-overs: a hand-over nobody hears is skipped, so it would be wasted.
    const call = new AcquireCall(
      target,
      field,
      chain,
      ttlMs,
      leaseMs === undefined,
      startedAt + waitMs,
      waitMs > 0,
      signal,
      throwOnTimeout,
      this.#waits.queuing(target) && waitMs > 0 && this.#notifications.grantsReady
        ? new Ticket(target, field, ttlMs, this.#settings.grantChannel)
        : undefined,
      newLease,
      startedAt,
      this.#loop.resume,
      this.#fail,
    );
    this.#queue.begin(chain);
    // The call resolves with what newLease made: an L.
    return new Promise<Lease | null>((resolve, reject) => {
      call.resolve = resolve;
      call.reject = reject;
      void this.#loop.start(call);
    }) as Promise<L | null>;
  }

  /** Ends the call with `error`: the abort's reason as it is, anything else as a lock error. */
  readonly #fail = (call: AcquireCall, error: unknown): void => {
    const { signal } = call;
    const failure =
      signal?.aborted === true && error === signal.reason
        ? error
        : redisError(error, `waiting for lock "${call.target.name}" ${sinceStart(call)}`);
    this.#end(call, undefined, true, failure);
  };

  /**
   * Ends the call: cleans up (see {@link Acquirer.#finish}), then resolves with `lease` or, if
   * `failed`, rejects with `failure`; a call that waited and got the lock resolves first.
   */
  #end(call: AcquireCall, lease: Lease | null | undefined, failed = false, failure?: unknown): void {
    if (call.acquired && call.waiter !== undefined) {
      // A waiter that got the lock has nothing to wait for: the caller goes on first, and the
      // waiter leaves the local queue in the microtask after (before any message or timer).
      settle(call, lease, failed, failure);
      void SETTLED.then(() => this.#cleanUp(call));
      return;
    }
    const cleanUp = this.#cleanUp(call);
    if (cleanUp === undefined) {
      settle(call, lease, failed, failure);
      return;
    }
    const settled = (): void => settle(call, lease, failed, failure);
    void cleanUp.then(settled, settled);
  }

  /** {@link Acquirer.#finish}, reporting what it throws as an error event. */
  #cleanUp(call: AcquireCall): Promise<unknown> | undefined {
    try {
      return this.#finish(call);
    } catch (error) {
      // Not expected: the clean-up's own steps do not throw. The caller still hears of the call.
      this.#events.error(redisError(error, `ending an acquire of lock "${call.target.name}"`) as Error);
      return undefined;
    }
  }

  /**
   * The end of an acquire, however it went: leaves the local queue, and for a caller that gave
   * up, the wait queue in Redis and whatever an abandoned attempt took. Returns the clean-up the
   * call waits for, if any.
   */
  #finish(call: AcquireCall): Promise<unknown> | undefined {
    const { target, field, chain, signal, deadline, waiter, acquired } = call;
    const protocol = target.protocol;
    this.#queue.end(chain);
    if (waiter !== undefined) {
      waiter.leave(acquired);
      this.#telemetry.waiting(target, -1);
    }
    if (call.ticket !== undefined) call.ticket.waiter = undefined;
    // A kind with a queue of its own: an acquire that may have joined it and gave up leaves it,
    // after its last attempt, unless another acquire of the same owner still waits there.
    const leave =
      !acquired && call.waiting && !this.#queue.isAcquiring(chain) && !this.#settings.isClosed()
        ? protocol.leave?.(target, field)
        : undefined;
    const left =
      leave === undefined
        ? undefined
        : this.#chains.run(chain, () => this.#calls.idempotent(leave, (attempt) => attempt < 3));
    if (
      !acquired &&
      !this.#settings.isClosed() &&
      (call.ticket !== undefined || call.abandoned !== undefined || left !== undefined)
    ) {
      // A caller that gave up is neither queued nor holding when its call returns, as long
      // as Redis answers in time: by its deadline plus a command timeout, or within a short
      // grace after an abort. Otherwise the clean-up goes on after the call returned.
      const budget =
        signal?.aborted === true
          ? ABORT_CLEANUP_GRACE_MS
          : Number.isFinite(deadline)
            ? deadline + this.#calls.timeoutMs - performance.now()
            : this.#calls.timeoutMs;
      return within(
        Promise.all([call.ticket && this.#queue.withdraw(call.ticket), call.abandoned, left]),
        budget,
      );
    }
    return undefined;
  }

  /**
   * Ends the call with the kind's lease for a hold just taken; if the kind cannot make one, the
   * hold is given back. If the caller gave up meanwhile, the lease goes straight back too.
   */
  #handOut(call: AcquireCall, taken: { readonly hold: Hold; readonly proof: string | undefined }): void {
    const { signal, startedAt } = call;
    call.acquired = true;
    let lease: Lease;
    try {
      lease = call.newLease(taken.hold, this.#leaseHost, taken.proof);
    } catch (error) {
      this.#holds.release(taken.hold).catch(() => undefined);
      throw error;
    }
    if (this.#settings.isClosed() || signal?.aborted === true) {
      this.#giveBack(lease, startedAt, signal).then(
        (given) => this.#end(call, given),
        (error: unknown) => this.#fail(call, error),
      );
      return;
    }
    this.#acquired(lease, startedAt);
    this.#end(call, lease);
  }

  /** Granted after the caller gave up: hands the lock straight back and rejects. */
  async #giveBack<L extends Lease>(lease: L, startedAt: number, signal: AbortSignal | undefined): Promise<L> {
    await lease.release().catch(() => undefined);
    this.#settings.assertOpen();
    signal?.throwIfAborted();
    this.#acquired(lease, startedAt);
    return lease;
  }

  #acquired(lease: Lease, startedAt: number): void {
    if (this.#events.listening('acquired')) {
      this.#events.emit('acquired', {
        name: lease.name,
        key: lease.key,
        holdCount: lease.holdCount,
        waitedMs: performance.now() - startedAt,
      });
    }
  }
}
