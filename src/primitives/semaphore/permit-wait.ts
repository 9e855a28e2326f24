import type { Condition, ConditionTry, WakePolicy } from '../../engine/index.js';
import { LockTimeoutError, type ReplicationError } from '../../errors.js';
import { permitWakes, type AcquireReply } from './protocol.js';

/** The kind, as telemetry names it. */
export const KIND = 'semaphore';

/**
 * With `syncReplicas`, how long an acquire pauses before it tries again after a grant too few
 * replicas acknowledged (doubled each time, up to the maximum), as a lock's acquire does.
 */
const UNREPLICATED_RETRY_MIN_MS = 50;
const UNREPLICATED_RETRY_MAX_MS = 1_000;

/** A try that took nothing: only a message (or a reconnect) is worth another. */
const NOT_YET: ConditionTry<number> = Object.freeze({ done: false, recheckMs: Number.POSITIVE_INFINITY });
/** A try after a grant too few replicas acknowledged, once paused: at once, with no message. */
const AGAIN: ConditionTry<number> = Object.freeze({ done: false, recheckMs: 0 });

/** An attempt whose grant too few replicas acknowledged, and that was given back. @internal */
export interface Unreplicated {
  readonly status: 'unreplicated';
  readonly error: ReplicationError;
}

/** What an acquire or `withPermits` throws when its wait runs out. @internal */
export function timedOut(permits: number, name: string): LockTimeoutError {
  return new LockTimeoutError(
    `Timed out waiting for ${permits} permit${permits === 1 ? '' : 's'} of semaphore "${name}"`,
  );
}

/** What a {@link PermitWait} asks of its semaphore. @internal */
export interface PermitSource {
  readonly name: string;
  readonly channel: string;
  /** One try, made idempotent by its request key (see PermitTaking). */
  attempt(permits: number, deadline: number): Promise<AcquireReply | Unreplicated>;
  /** Gives back permits a try took after its caller stopped waiting. */
  giveBack(permits: number): Promise<unknown>;
}

/**
 * One acquire's wait for permits, as the engine's wait loop keeps it while it waits: its state in
 * fields, its steps in methods and its message text made only when read, so that a waiting
 * acquire keeps one object of its own beside the loop's. A try that took them finds the permits
 * asked for (given back by `undo` if the caller stopped waiting meanwhile).
 * @internal
 */
export class PermitWait implements Condition<number, boolean | undefined> {
  /** The last attempt's grant too few replicas acknowledged (it was given back). */
  unreplicated: ReplicationError | undefined;
  /** The pause after the next such grant. */
  pauseMs = UNREPLICATED_RETRY_MIN_MS;

  constructor(
    readonly source: PermitSource,
    /** The permits asked for. */
    readonly demand: number,
    /**
     * Whether a wait that runs out rejects with a {@link LockTimeoutError} (an acquire), and one
     * that took them resolves undefined; otherwise it resolves whether it took them.
     */
    readonly throwOnTimeout: boolean,
  ) {}

  get what(): string {
    return `semaphore "${this.source.name}"`;
  }

  get kind(): string {
    return KIND;
  }

  get channel(): string {
    return this.source.channel;
  }

  get wakes(): WakePolicy {
    return permitWakes;
  }

  async attempt(deadline: number): Promise<ConditionTry<number>> {
    const permits = this.demand;
    const reply = await this.source.attempt(permits, deadline);
    if (reply.status === 'taken') return { done: true, value: permits };
    this.unreplicated = reply.status === 'unreplicated' ? reply.error : undefined;
    if (this.unreplicated === undefined) {
      // Every release publishes the new count, and so does a call that creates the counter or
      // sets it: only a message (or a reconnect) is worth another try.
      return NOT_YET;
    }
    // The replicas lag or are gone: trying again at once would most likely fail the same way.
    // Pause (within the wait), then try again without waiting for a message.
    const pause = Math.min(this.pauseMs, deadline - performance.now());
    this.pauseMs = Math.min(UNREPLICATED_RETRY_MAX_MS, this.pauseMs * 2);
    if (pause > 0) await new Promise((resolve) => setTimeout(resolve, pause).unref());
    return AGAIN;
  }

  undo(permits: number): Promise<unknown> {
    return this.source.giveBack(permits);
  }

  end(found: number | null): boolean | undefined {
    if (found !== null) return this.throwOnTimeout ? undefined : true;
    // The wait ran out on a grant too few replicas acknowledged: say so, not "timed out".
    if (this.unreplicated !== undefined) throw this.unreplicated;
    if (this.throwOnTimeout) throw timedOut(this.demand, this.source.name);
    return false;
  }
}
