import type { ConditionTry, Engine, ScriptCall, Synced, Writes } from '../../engine/index.js';
import { LockError, type ReplicationError } from '../../errors.js';
import {
  acquireCall,
  acquireReply,
  cancelAcquireCall,
  cancelDrainCall,
  drainCall,
  integerReply,
  permitWakes,
  type AcquireReply,
  type SemaphoreTarget,
} from './protocol.js';

/** The kind, as telemetry names it. */
export const KIND = 'semaphore';

/**
 * How long a given-up acquire's request key refuses late copies, in milliseconds, and how long
 * the cancel is retried (half of it) while Redis does not answer.
 */
const CANCEL_RECORD_TTL_MS = 60_000;

/**
 * With `syncReplicas`, how long an acquire pauses before it tries again after a grant too few
 * replicas acknowledged (doubled each time, up to the maximum), as a lock's acquire does.
 */
const UNREPLICATED_RETRY_MIN_MS = 50;
const UNREPLICATED_RETRY_MAX_MS = 1_000;

/** An attempt whose grant too few replicas acknowledged, and that was given back. */
interface Unreplicated {
  readonly status: 'unreplicated';
  readonly error: ReplicationError;
}

/** What an attempt took. */
interface Taken {
  readonly permits: number;
}

/** An integer reply of a semaphore script, or a `REDIS_ERROR` that says it was not one. @internal */
export function integerOf(reply: unknown, name: string): number {
  const value = integerReply(reply);
  if (value === undefined) {
    throw new LockError('REDIS_ERROR', `Unexpected reply from a script of semaphore "${name}"`);
  }
  return value;
}

/**
 * The writes of a semaphore that take permits — an acquire's attempts and the wait around them,
 * and a drain — each made safe to retry by its request key, and undone (cancelled) when its
 * outcome stays unknown or, with `syncReplicas`, too few replicas acknowledged it: a failover
 * could otherwise hand the same permits out twice.
 * @internal
 */
export class PermitTaking {
  readonly #engine: Engine;
  readonly #target: SemaphoreTarget;
  readonly #writes: Writes;
  /** Gives back permits an attempt took after its caller stopped waiting. */
  readonly #giveBack: (permits: number) => Promise<unknown>;

  constructor(
    engine: Engine,
    target: SemaphoreTarget,
    writes: Writes,
    giveBack: (permits: number) => Promise<unknown>,
  ) {
    this.#engine = engine;
    this.#target = target;
    this.#writes = writes;
    this.#giveBack = giveBack;
  }

  /** Takes `permits`, waiting up to `waitMs` (woken by the channel): resolves whether it took them. */
  async wait(permits: number, waitMs: number, signal: AbortSignal | undefined): Promise<boolean> {
    /** The last attempt's grant too few replicas acknowledged (it was given back). */
    let unreplicated: ReplicationError | undefined;
    let pauseMs = UNREPLICATED_RETRY_MIN_MS;
    const found = await this.#engine.waitFor<Taken>(
      {
        what: `semaphore "${this.#target.name}"`,
        kind: KIND,
        channel: this.#target.channel,
        wakes: permitWakes,
        demand: permits,
        attempt: async (deadline): Promise<ConditionTry<Taken>> => {
          const reply = await this.#attempt(permits, deadline);
          if (reply.status === 'taken') return { done: true, value: { permits } };
          unreplicated = reply.status === 'unreplicated' ? reply.error : undefined;
          if (unreplicated !== undefined) {
            // The replicas lag or are gone: trying again at once would most likely fail the
            // same way. Pause (within the wait), then try again without waiting for a message.
            const pause = Math.min(pauseMs, deadline - performance.now());
            pauseMs = Math.min(UNREPLICATED_RETRY_MAX_MS, pauseMs * 2);
            if (pause > 0) await new Promise((resolve) => setTimeout(resolve, pause).unref());
            return { done: false, recheckMs: 0 };
          }
          // Every release publishes the new count, and so does a call that creates the counter
          // or sets it: only a message (or a reconnect) is worth another try.
          return { done: false, recheckMs: Number.POSITIVE_INFINITY };
        },
        undo: (value) => this.#giveBack(value.permits),
      },
      waitMs,
      signal,
    );
    // The wait ran out on a grant too few replicas acknowledged: say so, not "timed out".
    if (found === null && unreplicated !== undefined) throw unreplicated;
    return found !== null;
  }

  /** Takes every free permit: see {@link Semaphore.drainPermits}. */
  async drain(): Promise<number> {
    const requestKey = this.#writes.requestKey();
    const { reply, acknowledged } = await this.#writes.recorded(
      (request, recordTtlMs) => drainCall(this.#target, request, recordTtlMs),
      `draining the permits of semaphore "${this.#target.name}"`,
      requestKey,
    );
    const taken = integerOf(reply, this.#target.name);
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
  async #attempt(permits: number, deadline: number): Promise<AcquireReply | Unreplicated> {
    const engine = this.#engine;
    const requestKey = this.#writes.requestKey();
    const until = Math.min(deadline, performance.now() + this.#writes.retryMs);
    const cancel = cancelAcquireCall(this.#target, requestKey, permits, CANCEL_RECORD_TTL_MS);
    let synced: Synced;
    try {
      synced = await engine.syncedCall(
        acquireCall(this.#target, requestKey, permits, this.#writes.recordTtlMs),
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
    const outcome = acquireReply(synced.reply);
    if (outcome?.status === 'taken') {
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
    if (outcome === undefined || outcome.status === 'cancelled') {
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
