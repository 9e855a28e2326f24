import { createRequire } from 'node:module';
import type * as OpenTelemetry from '@opentelemetry/api';
import { LockNotOwnedError, type LockLostReason } from '../errors.js';
import { ConditionReporter, NO_CONDITION_TELEMETRY, type ConditionTelemetry } from './condition-telemetry.js';
import type { Hold } from './holds/hold.js';
import type { Lease } from './lease.js';
import {
  ACQUIRE_OUTCOME,
  AcquireMetrics,
  AttributeCache,
  KIND,
  markFailed,
  NAME,
  rejectedOutcome,
  WAITED_MS,
  type AcquireOutcomeName,
  type OpenTelemetryApi,
} from './telemetry-parts.js';
import type { Protocol, Target } from './types.js';

export type { AcquireOutcomeName, OpenTelemetryApi } from './telemetry-parts.js';

/** The name of latchkey's tracer and meter. */
export const INSTRUMENTATION_NAME = 'latchkey';
/** latchkey's version, as its tracer and meter report it; a unit test keeps it equal to package.json's. */
export const LIBRARY_VERSION = '0.1.0';

/** How a release call ended, as its span says it. @internal */
export type ReleaseOutcomeName = 'released' | 'partial' | 'not-owner' | 'error';

/**
 * What the engine reports to OpenTelemetry, at the points where it knows it. The engine holds
 * one per client: {@link NO_TELEMETRY} when telemetry is off or `@opentelemetry/api` is not
 * installed, so the hot path then costs a call to an empty function and allocates nothing.
 *
 * Nothing here ever carries an owner's identity (a hash field, a client id, a simple lock's
 * token): only the lock's name, its kind and what happened.
 * @internal
 */
export interface Telemetry {
  /**
   * Whether an acquire or release call is worth a span and a measurement now: false for
   * {@link NO_TELEMETRY}, and while neither a TracerProvider nor (when the client was made) a
   * MeterProvider is registered. Callers then skip the wrapping.
   */
  readonly enabled: boolean;
  /** Runs one acquire call (`run`) in a span and records its outcome and wait. */
  /**
   * Runs one acquire call (`run`) of `target` in a span that starts at `startedAt`, the start of
   * the caller's call by the monotonic clock, which its `waitMs` counts from.
   */
  acquire<L extends Lease>(
    target: Target,
    waitMs: number,
    signal: AbortSignal | undefined,
    startedAt: number,
    run: () => Promise<L | null>,
  ): Promise<L | null>;
  /** Runs one release call (`run`) of `hold` in a span. */
  release(hold: Hold, run: () => Promise<void>): Promise<void>;
  /** A local waiter of `target` started (+1) or stopped (-1) waiting. */
  waiting(target: Target, delta: 1 | -1): void;
  /** `hold` ended (its last release, or its loss): records its hold time, once. */
  ended(hold: Hold): void;
  /** `hold` was declared lost. */
  lost(hold: Hold, reason: LockLostReason): void;
  /** A renewal call for `count` holds of one kind failed (it is retried). */
  renewalFailed(protocol: Protocol, count: number): void;
  /** What the calls on a semaphore or a latch report (they take no hold). */
  readonly conditions: ConditionTelemetry;
}

/** Telemetry that reports nothing. @internal */
export const NO_TELEMETRY: Telemetry = Object.freeze({
  enabled: false,
  acquire: <L extends Lease>(
    _target: Target,
    _waitMs: number,
    _signal: AbortSignal | undefined,
    _startedAt: number,
    run: () => Promise<L | null>,
  ) => run(),
  release: (_hold: Hold, run: () => Promise<void>) => run(),
  waiting: () => undefined,
  ended: () => undefined,
  lost: () => undefined,
  renewalFailed: () => undefined,
  conditions: NO_CONDITION_TELEMETRY,
});

/** Loads a package by name, as `require` does; throws when it cannot. @internal */
export type ModuleLoader = (id: string) => unknown;

/** Node's resolution from this file: the same copy the application would find beside latchkey. */
function requireFromHere(id: string): unknown {
  // The CommonJS build has __filename; the ESM build has none, and import.meta.url instead.
  // (tsup's shim for import.meta.url in CommonJS builds a URL from the path unescaped, so a
  // directory with `#` or `%` in its name would resolve from the wrong place.)
  const here = typeof __filename === 'string' ? __filename : import.meta.url;
  return createRequire(here)(id);
}

/**
 * `@opentelemetry/api` if it can be loaded and has what latchkey uses (trace and metrics: 1.3 or
 * later), else undefined. Never throws: telemetry is optional, and a missing or broken API must
 * not stop a lock from working.
 * @internal
 */
export function loadOpenTelemetry(load: ModuleLoader = requireFromHere): OpenTelemetryApi | undefined {
  let api: Partial<OpenTelemetryApi> | undefined;
  try {
    api = load('@opentelemetry/api') as Partial<OpenTelemetryApi> | undefined;
  } catch {
    return undefined;
  }
  if (
    typeof api?.trace?.getTracer !== 'function' ||
    typeof api.metrics?.getMeter !== 'function' ||
    typeof api.SpanStatusCode?.ERROR !== 'number'
  ) {
    return undefined;
  }
  return api as OpenTelemetryApi;
}

/** The process's `@opentelemetry/api`, looked up once, on the first client that wants telemetry. */
let processApi: { readonly api: OpenTelemetryApi | undefined } | undefined;

/** {@link loadOpenTelemetry}, cached for the process. @internal */
export function openTelemetry(): OpenTelemetryApi | undefined {
  processApi ??= { api: loadOpenTelemetry() };
  return processApi.api;
}

/**
 * Telemetry on `api`'s global tracer and meter providers, or {@link NO_TELEMETRY} without an API.
 * The meter is taken now: a MeterProvider registered after this is not seen (traces go through
 * the API's proxy, so a TracerProvider registered later is).
 * @internal
 */
export function createTelemetry(api: OpenTelemetryApi | undefined): Telemetry {
  return api === undefined ? NO_TELEMETRY : new OpenTelemetryReporter(api);
}

/** Attribute names of holds, in OpenTelemetry's dotted style under latchkey's namespace. */
const HOLD_COUNT = 'latchkey.lock.hold_count';
const RELEASE_OUTCOME = 'latchkey.release.outcome';
const LOST_REASON = 'latchkey.lease.lost_reason';

/**
 * Tells whether the API has a TracerProvider registered. The API's global provider is a proxy
 * that hands out no tracer of its own until one is registered; once one is, the answer stays
 * true. A provider that is not that proxy is taken as registered.
 */
function tracingProbe(api: OpenTelemetryApi): () => boolean {
  const provider = api.trace.getTracerProvider() as Partial<OpenTelemetry.ProxyTracerProvider>;
  if (typeof provider.getDelegateTracer !== 'function') return () => true;
  let registered = false;
  return () => {
    registered ||= provider.getDelegateTracer?.(INSTRUMENTATION_NAME, LIBRARY_VERSION) !== undefined;
    return registered;
  };
}

class OpenTelemetryReporter implements Telemetry {
  readonly #api: OpenTelemetryApi;
  readonly #tracer: OpenTelemetry.Tracer;
  /**
   * Whether spans may record: true once a TracerProvider is registered with the API. Until then
   * the API's proxy tracer makes spans that record nothing, so acquire and release calls are not
   * wrapped at all.
   */
  #tracing: () => boolean;
  /** Whether the meter taken when the client was made is a real one, not the API's no-op meter. */
  readonly #metering: boolean;
  readonly #acquires: AcquireMetrics;
  readonly #holdDuration: OpenTelemetry.Histogram;
  readonly #leasesLost: OpenTelemetry.Counter;
  readonly #renewalsFailed: OpenTelemetry.Counter;
  readonly #attributes = new AttributeCache();
  readonly conditions: ConditionTelemetry;

  constructor(api: OpenTelemetryApi) {
    this.#api = api;
    this.#tracer = api.trace.getTracer(INSTRUMENTATION_NAME, LIBRARY_VERSION);
    this.#tracing = tracingProbe(api);
    const meter = api.metrics.getMeter(INSTRUMENTATION_NAME, LIBRARY_VERSION);
    this.#metering = api.createNoopMeter === undefined || meter !== api.createNoopMeter();
    this.#acquires = new AcquireMetrics(meter, this.#attributes);
    this.#holdDuration = meter.createHistogram('latchkey.hold.duration', {
      description:
        'Time a lock was held: from its first acquisition to the release that freed it, or its loss.',
      unit: 'ms',
    });
    this.#leasesLost = meter.createCounter('latchkey.leases.lost', {
      description: 'Holds declared lost, by reason (latchkey.lease.lost_reason).',
      unit: '{lease}',
    });
    this.#renewalsFailed = meter.createCounter('latchkey.renewals.failed', {
      description: 'Held locks whose renewal call failed (the watchdog retries it).',
      unit: '{lock}',
    });
    this.conditions = new ConditionReporter({
      api,
      tracer: this.#tracer,
      meter,
      acquires: this.#acquires,
      attributes: this.#attributes,
      enabled: () => this.enabled,
    });
  }

  get enabled(): boolean {
    return this.#metering || this.#tracing();
  }

  async acquire<L extends Lease>(
    target: Target,
    waitMs: number,
    signal: AbortSignal | undefined,
    startedAt: number,
    run: () => Promise<L | null>,
  ): Promise<L | null> {
    const kind = target.protocol.kind;
    const span = this.#tracer.startSpan('latchkey.acquire', {
      attributes: { [NAME]: target.name, [KIND]: kind },
      startTime: performance.timeOrigin + startedAt,
    });
    let outcome: AcquireOutcomeName = 'error';
    try {
      const lease = await run();
      if (lease === null) {
        outcome = waitMs === 0 ? 'busy' : 'timeout';
      } else {
        outcome = 'acquired';
        span.setAttribute(HOLD_COUNT, lease.holdCount);
      }
      return lease;
    } catch (error) {
      const rejected = rejectedOutcome(error, signal, waitMs);
      if (rejected === undefined) markFailed(this.#api, span, error);
      outcome = rejected ?? 'error';
      throw error;
    } finally {
      const waitedMs = performance.now() - startedAt;
      span.setAttributes({ [ACQUIRE_OUTCOME]: outcome, [WAITED_MS]: waitedMs });
      span.end();
      this.#acquires.ended(kind, outcome, waitedMs);
    }
  }

  async release(hold: Hold, run: () => Promise<void>): Promise<void> {
    const span = this.#tracer.startSpan('latchkey.release', {
      attributes: { [NAME]: hold.name, [KIND]: hold.target.protocol.kind },
    });
    let outcome: ReleaseOutcomeName = 'error';
    try {
      await run();
      outcome = hold.count === 0 ? 'released' : 'partial';
      span.setAttribute(HOLD_COUNT, hold.count);
    } catch (error) {
      if (error instanceof LockNotOwnedError) outcome = 'not-owner';
      markFailed(this.#api, span, error);
      throw error;
    } finally {
      span.setAttribute(RELEASE_OUTCOME, outcome);
      span.end();
    }
  }

  waiting(target: Target, delta: 1 | -1): void {
    this.#acquires.waiting(target.protocol.kind, delta);
  }

  ended(hold: Hold): void {
    // Its hold time counts from its first confirmation, and is recorded once.
    const since = hold.acquiredAt;
    if (since === 0) return;
    hold.acquiredAt = 0;
    this.#holdDuration.record(performance.now() - since, this.#attributes.of(hold.target.protocol.kind));
  }

  lost(hold: Hold, reason: LockLostReason): void {
    this.#leasesLost.add(1, this.#attributes.with(hold.target.protocol.kind, LOST_REASON, reason));
  }

  renewalFailed(protocol: Protocol, count: number): void {
    this.#renewalsFailed.add(count, this.#attributes.of(protocol.kind));
  }
}
