import type { ConditionCall, Engine, Writes } from '../../engine/index.js';
import { addCall, availableCall, deleteCall, trySetCall, type SemaphoreTarget } from './protocol.js';

/**
 * The calls of a semaphore on its counter that take no permits: permits given back or added, the
 * first count set, the count read, the counter deleted. A write is recorded and cannot be undone,
 * so one too few replicas acknowledged is reported on `error` (see {@link Writes}).
 * @internal
 */
export class PermitCounter {
  readonly #engine: Engine;
  readonly #target: SemaphoreTarget;
  readonly #writes: Writes;
  /** What a release is reported as to OpenTelemetry. */
  readonly #report: ConditionCall;

  constructor(engine: Engine, target: SemaphoreTarget, writes: Writes, report: ConditionCall) {
    this.#engine = engine;
    this.#target = target;
    this.#writes = writes;
    this.#report = report;
  }

  /** Gives `permits` back (a release), reported as a call. */
  async release(permits: number): Promise<void> {
    await this.#engine.conditionTelemetry.release(this.#report, permits, async () => {
      await this.add(
        permits,
        `releasing ${permits} permit${permits === 1 ? '' : 's'} of semaphore "${this.#target.name}"`,
      );
    });
  }

  /** Adds `permits` (negative: takes them away), creating a missing counter; resolves the new count. */
  async add(permits: number, doing: string): Promise<number> {
    return this.#writes.giving(
      (requestKey, recordTtlMs) => addCall(this.#target, requestKey, permits, recordTtlMs),
      doing,
      () =>
        `${permits} permit${Math.abs(permits) === 1 ? ' was' : 's were'} added to semaphore "${this.#target.name}"`,
    );
  }

  /** Sets the count to `permits` if there is no counter yet: resolves whether it set it. */
  async trySet(permits: number): Promise<boolean> {
    const name = this.#target.name;
    return this.#writes.giving(
      (requestKey, recordTtlMs) => trySetCall(this.#target, requestKey, permits, recordTtlMs),
      `setting the permits of semaphore "${name}"`,
      (set) => set && `The permits of semaphore "${name}" were set`,
    );
  }

  /** The count of free permits now (a missing counter created first when it has a `permits` option). */
  async available(): Promise<number> {
    const call = availableCall(this.#target);
    return call.decode(
      await this.#engine.call(call, `reading the permits of semaphore "${this.#target.name}"`),
    );
  }

  /** Deletes the counter: resolves whether it existed. */
  async delete(): Promise<boolean> {
    const name = this.#target.name;
    // Cannot be undone either: a shortfall is reported, as for the permits given.
    return this.#writes.repeatable(
      deleteCall(this.#target),
      `deleting semaphore "${name}"`,
      (deleted) => deleted && `Semaphore "${name}" was deleted`,
    );
  }
}

/**
 * Runs `fn`, then calls `release` however `fn` ends. Resolves with what `fn` resolves with;
 * rejects with what `fn` throws rather than a failed release after it.
 * @internal
 */
export async function runThenRelease<T>(
  fn: () => T | PromiseLike<T>,
  release: () => Promise<void>,
): Promise<Awaited<T>> {
  let failed = false;
  try {
    return await fn();
  } catch (error) {
    failed = true;
    throw error;
  } finally {
    try {
      await release();
    } catch (error) {
      // The callback's own error says more than a failed release after it.
      if (!failed) throw error; // eslint-disable-line no-unsafe-finally
    }
  }
}
