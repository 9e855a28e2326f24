import type { Engine } from './engine.js';
import type { ScriptCall } from './types.js';

/** How long a recorded write is retried: twice the command timeout, within these bounds. */
const RETRY_MIN_MS = 1_000;
const RETRY_MAX_MS = 8_000;
/** What a request's record outlives the last copy of its call by, in milliseconds. */
const RECORD_MARGIN_MS = 2_000;

/**
 * Builds a recorded write's call: the script records its outcome under `requestKey` for
 * `recordTtlMs`, so that a retried copy answers as the first did and applies nothing twice.
 * @internal
 */
export type RecordedCall<R> = (requestKey: string, recordTtlMs: number) => ScriptCall<R>;

/**
 * What a write did, by what its reply means, for the report of a replica shortfall: a sentence
 * such as `Latch "warm-up" was counted down`, or false when it changed nothing.
 * @internal
 */
export type Done<R> = (value: R) => string | false;

/** What a write's reply means, and how many replicas acknowledged it. @internal */
export interface Written<R> {
  readonly value: R;
  readonly acknowledged: number;
}

/**
 * The writes of one synchronizer that are not holds (a semaphore's counter, a latch, a permit
 * released by its id), under one policy:
 *
 * - **Recorded.** Each call carries a fresh request key, under which the script records its
 *   outcome for {@link Writes.recordTtlMs}; the call is retried on transient failures for
 *   {@link Writes.retryMs}, and a retried copy finds the record and changes nothing again. The
 *   record outlives every copy: the retry window, plus two command timeouts for a copy sent
 *   last, plus a margin.
 * - **Replicas.** With `syncReplicas`, the wait for replicas goes right behind each call.
 * - **Shortfall.** A write that gives (permits back, a count-down, a count set, a delete)
 *   cannot be undone once applied: another process may have acted on it already. So one that
 *   too few replicas acknowledged resolves as usual and the shortfall is reported as a
 *   `ReplicationError` on the client's `error` event, as a lock's release is; rejecting would
 *   invite a second call that gives twice. A write that takes (an acquire) undoes itself
 *   instead: see the kind.
 * - **Replies.** Each reply is read through its call's own {@link ScriptCall.decode}, here and
 *   nowhere else: a write resolves with what its reply means, and a reply its script never
 *   gives rejects with a `REDIS_ERROR` that names the script.
 * @internal
 */
export class Writes {
  readonly #engine: Engine;
  readonly #key: string;

  /** Writes of the synchronizer at `key`; request keys are made beside it (same slot). */
  constructor(engine: Engine, key: string) {
    this.#engine = engine;
    this.#key = key;
  }

  /** How long a write is retried while Redis does not answer, in milliseconds. */
  get retryMs(): number {
    return Math.min(RETRY_MAX_MS, Math.max(RETRY_MIN_MS, 2 * this.#engine.commandTimeoutMs));
  }

  /** How long a request key records its outcome, in milliseconds: past every copy of its call. */
  get recordTtlMs(): number {
    return this.retryMs + 2 * this.#engine.commandTimeoutMs + RECORD_MARGIN_MS;
  }

  /** A fresh request key, for a call that must take effect once. */
  requestKey(): string {
    return this.#engine.requestKey(this.#key);
  }

  /**
   * Sends a recorded write (with a fresh request key unless given), retried for
   * {@link Writes.retryMs}, and resolves with what its reply means and the replicas that
   * acknowledged it.
   * @throws a LockError `REDIS_ERROR` when Redis fails, or for a reply the script never gives.
   */
  recorded<R>(call: RecordedCall<R>, doing: string, requestKey = this.requestKey()): Promise<Written<R>> {
    return this.#sent(call(requestKey, this.recordTtlMs), doing, performance.now() + this.retryMs);
  }

  /**
   * Sends a recorded write that cannot be undone and resolves with what its reply means; `done`
   * says what it did, for the report of a replica shortfall.
   */
  async giving<R>(call: RecordedCall<R>, doing: string, done: Done<R>): Promise<R> {
    const { value, acknowledged } = await this.recorded(call, doing);
    this.reportShortfall(acknowledged, done(value));
    return value;
  }

  /**
   * {@link Writes.giving} for a call that is safe to repeat as it is (a delete): no request key,
   * retried as a read is.
   */
  async repeatable<R>(call: ScriptCall<R>, doing: string, done: Done<R>): Promise<R> {
    const { value, acknowledged } = await this.#sent(call, doing, undefined);
    this.reportShortfall(acknowledged, done(value));
    return value;
  }

  /** Sends `call` until `until` (monotonic ms; undefined: as a read) and reads its reply. */
  async #sent<R>(call: ScriptCall<R>, doing: string, until: number | undefined): Promise<Written<R>> {
    const { reply, acknowledged } = await this.#engine.syncedCall(call, doing, until);
    return { value: call.decode(reply), acknowledged };
  }

  /** Reports on `error` that too few replicas acknowledged a write that did `done`. */
  reportShortfall(acknowledged: number, done: string | false): void {
    if (done === false) return;
    const shortfall = this.#engine.shortfall(acknowledged, done);
    if (shortfall !== undefined) this.#engine.reportError(shortfall);
  }
}
