import type { Condition, ConditionTry, Engine, WakePolicy } from '../../engine/index.js';
import { LATCH_PROTOCOL, type LatchTarget } from './protocol.js';

/** The kind, as telemetry names it. @internal */
export const KIND = 'count-down-latch';

/** A message changes the count for everyone: every local waiter re-reads it. */
const wakeAll: WakePolicy = () => Number.POSITIVE_INFINITY;

/** A read that found the latch open. */
const OPEN: ConditionTry<true> = Object.freeze({ done: true, value: true });

/**
 * What an await of a latch waits for: its count at zero, read from Redis, re-read on a message on
 * its channel and when its key is due to expire. It keeps nothing of any one await, so the awaits
 * of a latch share it: an await that waits keeps no object of its own beside the wait loop's, and
 * no closure. Resolves whether the latch opened.
 * @internal
 */
export class LatchOpening implements Condition<true, boolean> {
  readonly #engine: Engine;
  readonly #name: string;
  readonly #target: LatchTarget;

  constructor(engine: Engine, name: string, target: LatchTarget) {
    this.#engine = engine;
    this.#name = name;
    this.#target = target;
  }

  get what(): string {
    return `latch "${this.#name}"`;
  }

  get kind(): string {
    return KIND;
  }

  get channel(): string {
    return this.#target.channel;
  }

  get wakes(): WakePolicy {
    return wakeAll;
  }

  async attempt(deadline: number): Promise<ConditionTry<true>> {
    const call = LATCH_PROTOCOL.state(this.#target);
    const state = call.decode(
      await this.#engine.call(
        call,
        `reading latch "${this.#name}"`,
        Number.isFinite(deadline) ? deadline : undefined,
      ),
    );
    if (state.count <= 0) return OPEN;
    return { done: false, recheckMs: state.ttlMs };
  }

  end(found: true | null): boolean {
    return found !== null;
  }
}
