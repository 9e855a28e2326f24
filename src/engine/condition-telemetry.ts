import type * as OpenTelemetry from '@opentelemetry/api';
import {
  ACQUIRE_OUTCOME,
  KIND,
  NAME,
  WAITED_MS,
  markFailed,
  rejectedOutcome,
  type AcquireMetrics,
  type AcquireOutcomeName,
  type AttributeCache,
  type OpenTelemetryApi,
} from './telemetry-parts.js';

/** Span attributes of the calls on things that are not holds. */
const PERMITS = 'latchkey.semaphore.permits';
const RELEASE_OUTCOME = 'latchkey.release.outcome';
const AWAIT_OUTCOME = 'latchkey.await.outcome';
const AWAIT_WAITED_MS = 'latchkey.await.waited_ms';
const COUNT = 'latchkey.latch.count';

/** How an await of a latch ended, as its span and the await histogram say it. @internal */
export type AwaitOutcomeName =
  /** The count was (or reached) zero. */
  | 'opened'
  /** One look (`waitMs` 0) found a count above zero. */
  | 'closed'
  /** `waitMs` ran out before the count reached zero. */
  | 'timeout'
  /** The caller's signal aborted. */
  | 'aborted'
  /** Anything else: a Redis failure, a closed client. */
  | 'error';

/** What a call on a semaphore or a latch is reported as: its kind and name, never an owner. @internal */
export interface ConditionCall {
  /** `latchkey.lock.kind`: `semaphore`, `count-down-latch`. */
  readonly kind: string;
  /** `latchkey.lock.name`. */
  readonly name: string;
}

/**
 * What a semaphore and a latch report to OpenTelemetry: permits taken and given back as a lock's
 * acquire and release are (the same span names and acquire metrics, with the permits asked for),
 * a latch's await and count-down in spans of their own, and waiters as the lock kinds' are.
 * Permits have no owner, so nothing is held from one call to another: no hold time, no loss.
 * @internal
 */
export interface ConditionTelemetry {
  /**
   * Whether a call is worth a span and a measurement now (see Telemetry.enabled): when not, a
   * caller skips the wrapping below, which would only pass its call through.
   */
  readonly enabled: boolean;
  /**
   * Runs one call that takes `permits` (`run` resolves whether it took them) in a
   * `latchkey.acquire` span, and records its outcome and wait.
   */
  acquire(
    call: ConditionCall,
    permits: number,
    waitMs: number,
    signal: AbortSignal | undefined,
    run: () => Promise<boolean>,
  ): Promise<boolean>;
  /** Runs one call that gives `permits` back in a `latchkey.release` span. */
  release(call: ConditionCall, permits: number, run: () => Promise<void>): Promise<void>;
  /**
   * Runs one await of a latch (`run` resolves whether it opened) in a `latchkey.await` span, and
   * records its outcome and wait.
   */
  awaiting(
    call: ConditionCall,
    waitMs: number,
    signal: AbortSignal | undefined,
    run: () => Promise<boolean>,
  ): Promise<boolean>;
  /** Runs one count-down (`run` resolves the count after it) in a `latchkey.count_down` span. */
  countDown(call: ConditionCall, run: () => Promise<number>): Promise<number>;
  /** A local waiter of a condition of `kind` started (+1) or stopped (-1) waiting. */
  waiting(kind: string, delta: 1 | -1): void;
}

/** Reports nothing. @internal */
export const NO_CONDITION_TELEMETRY: ConditionTelemetry = Object.freeze({
  enabled: false,
  acquire: (
    _c: ConditionCall,
    _p: number,
    _w: number,
    _s: AbortSignal | undefined,
    run: () => Promise<boolean>,
  ) => run(),
  release: (_c: ConditionCall, _p: number, run: () => Promise<void>) => run(),
  awaiting: (_c: ConditionCall, _w: number, _s: AbortSignal | undefined, run: () => Promise<boolean>) =>
    run(),
  countDown: (_c: ConditionCall, run: () => Promise<number>) => run(),
  waiting: () => undefined,
});

/** The parts of a client's OpenTelemetry reporter that the calls on conditions share with the holds'. @internal */
export interface ConditionReporterParts {
  readonly api: OpenTelemetryApi;
  readonly tracer: OpenTelemetry.Tracer;
  readonly meter: OpenTelemetry.Meter;
  readonly acquires: AcquireMetrics;
  readonly attributes: AttributeCache;
  /** Whether anything records now (see Telemetry.enabled): when not, calls are not wrapped. */
  readonly enabled: () => boolean;
}

/** {@link ConditionTelemetry} on OpenTelemetry. @internal */
export class ConditionReporter implements ConditionTelemetry {
  readonly #parts: ConditionReporterParts;
  readonly #awaitWait: OpenTelemetry.Histogram;

  constructor(parts: ConditionReporterParts) {
    this.#parts = parts;
    this.#awaitWait = parts.meter.createHistogram('latchkey.await.wait', {
      description: 'Time from an await of a latch to its outcome (latchkey.await.outcome).',
      unit: 'ms',
    });
  }

  get enabled(): boolean {
    return this.#parts.enabled();
  }

  async acquire(
    call: ConditionCall,
    permits: number,
    waitMs: number,
    signal: AbortSignal | undefined,
    run: () => Promise<boolean>,
  ): Promise<boolean> {
    if (!this.#parts.enabled()) return run();
    const span = this.#span('latchkey.acquire', call, { [PERMITS]: permits });
    const startedAt = performance.now();
    let outcome: AcquireOutcomeName = 'error';
    try {
      const taken = await run();
      outcome = taken ? 'acquired' : waitMs === 0 ? 'busy' : 'timeout';
      return taken;
    } catch (error) {
      outcome = this.#rejected(span, error, signal, waitMs);
      throw error;
    } finally {
      const waitedMs = performance.now() - startedAt;
      span.setAttributes({ [ACQUIRE_OUTCOME]: outcome, [WAITED_MS]: waitedMs });
      span.end();
      this.#parts.acquires.ended(call.kind, outcome, waitedMs);
    }
  }

  async release(call: ConditionCall, permits: number, run: () => Promise<void>): Promise<void> {
    if (!this.#parts.enabled()) return run();
    const span = this.#span('latchkey.release', call, { [PERMITS]: permits });
    let outcome: 'released' | 'error' = 'error';
    try {
      await run();
      outcome = 'released';
    } catch (error) {
      markFailed(this.#parts.api, span, error);
      throw error;
    } finally {
      span.setAttribute(RELEASE_OUTCOME, outcome);
      span.end();
    }
  }

  async awaiting(
    call: ConditionCall,
    waitMs: number,
    signal: AbortSignal | undefined,
    run: () => Promise<boolean>,
  ): Promise<boolean> {
    if (!this.#parts.enabled()) return run();
    const span = this.#span('latchkey.await', call);
    const startedAt = performance.now();
    let outcome: AwaitOutcomeName = 'error';
    try {
      const opened = await run();
      outcome = opened ? 'opened' : waitMs === 0 ? 'closed' : 'timeout';
      return opened;
    } catch (error) {
      const rejected = rejectedOutcome(error, signal, waitMs);
      if (rejected === undefined) markFailed(this.#parts.api, span, error);
      outcome = rejected === undefined ? 'error' : rejected === 'busy' ? 'closed' : rejected;
      throw error;
    } finally {
      const waitedMs = performance.now() - startedAt;
      span.setAttributes({ [AWAIT_OUTCOME]: outcome, [AWAIT_WAITED_MS]: waitedMs });
      span.end();
      this.#awaitWait.record(waitedMs, this.#parts.attributes.with(call.kind, AWAIT_OUTCOME, outcome));
    }
  }

  async countDown(call: ConditionCall, run: () => Promise<number>): Promise<number> {
    if (!this.#parts.enabled()) return run();
    const span = this.#span('latchkey.count_down', call);
    try {
      const count = await run();
      span.setAttribute(COUNT, count);
      return count;
    } catch (error) {
      markFailed(this.#parts.api, span, error);
      throw error;
    } finally {
      span.end();
    }
  }

  waiting(kind: string, delta: 1 | -1): void {
    this.#parts.acquires.waiting(kind, delta);
  }

  #span(name: string, call: ConditionCall, more?: OpenTelemetry.Attributes): OpenTelemetry.Span {
    return this.#parts.tracer.startSpan(name, {
      attributes: { [NAME]: call.name, [KIND]: call.kind, ...more },
    });
  }

  /** The outcome of a call that rejected; a failure marks its span. */
  #rejected(
    span: OpenTelemetry.Span,
    error: unknown,
    signal: AbortSignal | undefined,
    waitMs: number,
  ): AcquireOutcomeName {
    const outcome = rejectedOutcome(error, signal, waitMs);
    if (outcome !== undefined) return outcome;
    markFailed(this.#parts.api, span, error);
    return 'error';
  }
}
