import type { ConditionCall, Engine, ScriptCall, Synced, Writes } from '../../engine/index.js';
import { LockError } from '../../errors.js';
import type { PermitCounter } from './counter.js';
import { PermitWait, timedOut, type PermitSource, type Unreplicated } from './permit-wait.js';
import {
  acquireCall,
  cancelAcquireCall,
  cancelDrainCall,
  drainCall,
  type AcquireReply,
  type SemaphoreTarget,
} from './protocol.js';

/**
 * How long a given-up acquire's request key refuses late copies, in milliseconds, and how long
 * the cancel is retried (half of it) while Redis does not answer.
 */
const CANCEL_RECORD_TTL_MS = 60_000;

/**
 * The writes of a semaphore that take permits — an acquire's attempts and the wait around them,
 * and a drain — each made safe to retry by its request key, and undone (cancelled) when its
 * outcome stays unknown or, with `syncReplicas`, too few replicas acknowledged it: a failover
 * could otherwise hand the same permits out twice.
 * @internal
 */
export class PermitTaking implements PermitSource {
  readonly #engine: Engine;
  readonly #target: SemaphoreTarget;
  readonly #writes: Writes;
  /** Where permits an attempt took after its caller stopped waiting go back. */
  readonly #counter: PermitCounter;
  /** What an acquire is reported as to OpenTelemetry. */
  readonly #report: ConditionCall;

  constructor(
    engine: Engine,
    target: SemaphoreTarget,
    writes: Writes,
    counter: PermitCounter,
    report: ConditionCall,
  ) {
    this.#engine = engine;
    this.#target = target;
    this.#writes = writes;
    this.#counter = counter;
    this.#report = report;
  }

  get name(): string {
    return this.#target.name;
  }

  get channel(): string {
    return this.#target.channel;
  }

  /**
   * Takes `permits`, waiting up to `waitMs` (woken by the channel); reported as a call. Resolves
   * once it took them; rejects with a LockTimeoutError when the wait runs out.
   */
  take(permits: number, waitMs: number, signal: AbortSignal | undefined): Promise<void> {
    // Resolves undefined: a wait that runs out rejects rather than resolving false.
    return this.#wait(permits, waitMs, signal, true) as Promise<undefined>;
  }

  /** {@link PermitTaking.take}, resolving whether it took them rather than rejecting on a timeout. */
  tryTake(permits: number, waitMs: number, signal: AbortSignal | undefined): Promise<boolean> {
    return this.#wait(permits, waitMs, signal, false) as Promise<boolean>;
  }

  /**
   * The wait of {@link PermitTaking.take} and {@link PermitTaking.tryTake}: in the engine's wait
   * loop, with nothing of its own in between while telemetry records nothing; in an acquire's
   * span when it does, whose outcome says whether it took them (a timeout thrown after it).
   */
  #wait(
    permits: number,
    waitMs: number,
    signal: AbortSignal | undefined,
    throwOnTimeout: boolean,
  ): Promise<boolean | undefined> {
    const engine = this.#engine;
    const telemetry = engine.conditionTelemetry;
    if (!telemetry.enabled) {
      return engine.waitFor(new PermitWait(this, permits, throwOnTimeout), waitMs, signal);
    }
    const taken = telemetry.acquire(
      this.#report,
      permits,
      waitMs,
      signal,
      // Resolves whether it took them: it throws only what it fails with.
      () => engine.waitFor(new PermitWait(this, permits, false), waitMs, signal) as Promise<boolean>,
    );
    if (!throwOnTimeout) return taken;
    return taken.then((took) => {
      if (!took) throw timedOut(permits, this.#target.name);
      return undefined;
    });
  }

  /** Gives back permits an attempt took after its caller stopped waiting. */
  giveBack(permits: number): Promise<unknown> {
    if (this.#engine.closed) return Promise.resolve();
    return this.#counter.add(
      permits,
      `giving back ${permits} permit${permits === 1 ? '' : 's'} of semaphore "${this.#target.name}"`,
    );
  }

  /** Takes every free permit: see {@link Semaphore.drainPermits}. */
  async drain(): Promise<number> {
    const requestKey = this.#writes.requestKey();
    const { value: taken, acknowledged } = await this.#writes.recorded(
      (request, recordTtlMs) => drainCall(this.#target, request, recordTtlMs),
      `draining the permits of semaphore "${this.#target.name}"`,
      requestKey,
    );
    const shortfall =
      taken > 0
        ? this.#engine.shortfall(
            acknowledged,
            `${taken} permit${taken === 1 ? ' was' : 's were'} drained from semaphore "${this.#target.name}"`,
          )
        : undefined;
    if (shortfall !== undefined) {
      // Permits taken as an acquire takes them: a failover could hand them out again. Give them
      // back as an acquire's are (only if the drain's record says it took them, which the same
      // failover would lose with the drain), then fail: nothing is left taken.
      await this.#cancel(cancelDrainCall(this.#target, requestKey, CANCEL_RECORD_TTL_MS), 'drain');
      throw shortfall;
    }
    return taken;
  }

  /**
   * One try, made idempotent by its request key; cancelled when its outcome stays unknown, and
   * with `syncReplicas` when too few replicas acknowledged its grant.
   */
  async attempt(permits: number, deadline: number): Promise<AcquireReply | Unreplicated> {
    const engine = this.#engine;
    const requestKey = this.#writes.requestKey();
    const until = Math.min(deadline, performance.now() + this.#writes.retryMs);
    const cancel = cancelAcquireCall(this.#target, requestKey, permits, CANCEL_RECORD_TTL_MS);
    const acquire = acquireCall(this.#target, requestKey, permits, this.#writes.recordTtlMs);
    let synced: Synced;
    try {
      synced = await engine.syncedCall(
        acquire,
        `acquiring ${permits} permit${permits === 1 ? '' : 's'} of semaphore "${this.#target.name}"`,
        until,
      );
    } catch (error) {
      // The request may still have been applied, or a copy of it may yet be: refuse every copy
      // and give back what it took, before the caller hears of the failure (and before the wait
      // tries again with a fresh request while it lasts).
      await this.#cancel(cancel, 'acquire', deadline + engine.commandTimeoutMs);
      throw error;
    }
    // Read outside the try: a reply the script never gives is an error of its own, not a
    // failure to send that leaves the request's outcome unknown.
    const outcome = acquire.decode(synced.reply);
    if (outcome.status === 'taken') {
      const error = engine.shortfall(
        synced.acknowledged,
        `${permits} permit${permits === 1 ? '' : 's'} of semaphore "${this.#target.name}" ${permits === 1 ? 'was' : 'were'} granted`,
      );
      if (error !== undefined) {
        // Too few replicas have the grant: a failover now could hand the same permits to
        // others. Give them back before the caller hears of it. The cancel gives back only
        // what the request's record says it took, and a failover that loses the grant loses
        // that record with it, so it never adds permits that were not taken.
        await this.#cancel(cancel, 'acquire', deadline + engine.commandTimeoutMs);
        return { status: 'unreplicated', error };
      }
    }
    if (outcome.status === 'cancelled') {
      // Only a request this client gave up on is refused, and request keys are never reused.
      throw new LockError(
        'REDIS_ERROR',
        `Unexpected reply from the acquire script of semaphore "${this.#target.name}"`,
      );
    }
    return outcome;
  }

  /**
   * Cancels an acquire (or drain) request whose outcome is unknown or too few replicas
   * acknowledged: the caller waits for it a little (one retry window, and not past `until`,
   * monotonic ms); if Redis still does not answer, it goes on in the background until a late
   * copy of the request can no longer matter.
   */
  async #cancel(
    cancel: ScriptCall,
    what: 'acquire' | 'drain',
    until = Number.POSITIVE_INFINITY,
  ): Promise<void> {
    const engine = this.#engine;
    if (engine.closed) return;
    const giveUpAt = performance.now() + CANCEL_RECORD_TTL_MS / 2;
    const cancelling = engine
      .call(cancel, `cancelling an unconfirmed ${what} of semaphore "${this.#target.name}"`, giveUpAt)
      .catch(() => undefined);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      cancelling,
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, Math.max(0, Math.min(this.#writes.retryMs, until - performance.now())));
        timer.unref();
      }),
    ]);
    clearTimeout(timer);
  }
}
