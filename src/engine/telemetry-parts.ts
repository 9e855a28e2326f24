import type * as OpenTelemetry from '@opentelemetry/api';
import { LockTimeoutError } from '../errors.js';

/** The parts of `@opentelemetry/api` latchkey uses. @internal */
export type OpenTelemetryApi = Pick<typeof OpenTelemetry, 'trace' | 'metrics' | 'SpanStatusCode'> &
  Partial<Pick<typeof OpenTelemetry, 'createNoopMeter'>>;

/** Attribute names, in OpenTelemetry's dotted style under latchkey's namespace. @internal */
export const NAME = 'latchkey.lock.name';
/** @internal */
export const KIND = 'latchkey.lock.kind';
/** @internal */
export const ACQUIRE_OUTCOME = 'latchkey.acquire.outcome';
/** @internal */
export const WAITED_MS = 'latchkey.acquire.waited_ms';

/** How an acquire call ended, as its span and the wait histogram say it. @internal */
export type AcquireOutcomeName =
  /** The lock (or the permits) was taken: a first acquisition or a re-entry. */
  | 'acquired'
  /** One try (`waitMs` 0) found the lock held (too few permits free). */
  | 'busy'
  /** `waitMs` ran out while another owner held the lock (too few permits were free). */
  | 'timeout'
  /** The caller's signal aborted. */
  | 'aborted'
  /** Anything else: a Redis failure, a lost hold, a closed client. */
  | 'error';

/**
 * Metric attributes name the kind, never the lock: lock names often carry ids (`invoice:42`),
 * and one series per id would grow without bound. Spans carry the name.
 * @internal
 */
export type KindAttributes = Readonly<Record<string, string>>;

/** Metric attributes, made once per kind and per (kind, outcome or reason), then reused. @internal */
export class AttributeCache {
  readonly #attributes = new Map<string, KindAttributes>();

  /** `{ kind }`. */
  of(kind: string): KindAttributes {
    let attributes = this.#attributes.get(kind);
    if (attributes === undefined) {
      attributes = { [KIND]: kind };
      this.#attributes.set(kind, attributes);
    }
    return attributes;
  }

  /** `{ kind, [name]: value }`. */
  with(kind: string, name: string, value: string): KindAttributes {
    const id = `${kind}\n${name}\n${value}`;
    let attributes = this.#attributes.get(id);
    if (attributes === undefined) {
      attributes = { [KIND]: kind, [name]: value };
      this.#attributes.set(id, attributes);
    }
    return attributes;
  }
}

/** Marks `span` failed. Error messages name locks, never owners, so they may be shown. @internal */
export function markFailed(api: OpenTelemetryApi, span: OpenTelemetry.Span, error: unknown): void {
  const shown = error instanceof Error ? error : new Error(String(error));
  span.recordException(shown);
  span.setStatus({ code: api.SpanStatusCode.ERROR, message: shown.message });
}

/**
 * The outcome of a wait that rejected with `error`: `aborted` for the signal's reason, the
 * timeout's outcome (`timeout`, or `busy` for one try) for a {@link LockTimeoutError} (acquire()
 * rejects where tryAcquire() resolves null: the same outcome), else undefined: a failure.
 * @internal
 */
export function rejectedOutcome(
  error: unknown,
  signal: AbortSignal | undefined,
  waitMs: number,
): 'aborted' | 'busy' | 'timeout' | undefined {
  if (signal?.aborted === true && error === signal.reason) return 'aborted';
  if (error instanceof LockTimeoutError) return waitMs === 0 ? 'busy' : 'timeout';
  return undefined;
}

/**
 * The metrics of acquire calls, shared by every kind that takes something (holds and permits):
 * their wait by outcome, the acquisitions, the timeouts, and the calls waiting now.
 * @internal
 */
export class AcquireMetrics {
  readonly #wait: OpenTelemetry.Histogram;
  readonly #acquisitions: OpenTelemetry.Counter;
  readonly #timeouts: OpenTelemetry.Counter;
  readonly #waiters: OpenTelemetry.UpDownCounter;
  readonly #attributes: AttributeCache;

  constructor(meter: OpenTelemetry.Meter, attributes: AttributeCache) {
    this.#attributes = attributes;
    this.#wait = meter.createHistogram('latchkey.acquire.wait', {
      description: 'Time from an acquire call to its outcome (latchkey.acquire.outcome).',
      unit: 'ms',
    });
    this.#acquisitions = meter.createCounter('latchkey.acquisitions', {
      description: 'Acquisitions, re-entries included.',
      unit: '{acquisition}',
    });
    this.#timeouts = meter.createCounter('latchkey.acquire.timeouts', {
      description: 'Acquire calls whose waitMs ran out while another owner held the lock.',
      unit: '{timeout}',
    });
    this.#waiters = meter.createUpDownCounter('latchkey.waiters', {
      description:
        'Calls of this process waiting: for a lock held by another owner, for permits, for a latch to open.',
      unit: '{waiter}',
    });
  }

  /** An acquire call of `kind` ended with `outcome` after `waitedMs`. */
  ended(kind: string, outcome: AcquireOutcomeName, waitedMs: number): void {
    this.#wait.record(waitedMs, this.#attributes.with(kind, ACQUIRE_OUTCOME, outcome));
    if (outcome === 'acquired') this.#acquisitions.add(1, this.#attributes.of(kind));
    else if (outcome === 'timeout') this.#timeouts.add(1, this.#attributes.of(kind));
  }

  /** A local waiter of `kind` started (+1) or stopped (-1) waiting. */
  waiting(kind: string, delta: 1 | -1): void {
    this.#waiters.add(delta, this.#attributes.of(kind));
  }
}
