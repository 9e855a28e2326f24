// With `@opentelemetry/api` installed but no SDK registered, spans record nothing and metrics go
// to the API's no-op meter: latchkey then skips its telemetry wrapping on acquire and release,
// and picks it up once a provider is registered.
import * as api from '@opentelemetry/api';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, it } from 'vitest';
import { createTelemetry } from '../../src/engine/telemetry.js';
import type { Lease } from '../../src/engine/lease.js';
import type { Protocol, Target } from '../../src/engine/types.js';

const target: Target = {
  name: 'invoice:42',
  key: 'invoice:42',
  channel: 'unused',
  protocol: { kind: 'lock' } as Protocol,
};

describe('telemetry with the API and no SDK', () => {
  afterEach(() => {
    api.trace.disable();
    api.metrics.disable();
  });

  it('is off while no provider is registered', () => {
    const telemetry = createTelemetry(api);
    expect(telemetry.enabled).toBe(false);
    expect(telemetry.enabled).toBe(false);
  });

  it('turns on when a TracerProvider is registered after the client was made, and reports spans', async () => {
    const telemetry = createTelemetry(api);
    expect(telemetry.enabled).toBe(false);
    const exporter = new InMemorySpanExporter();
    api.trace.setGlobalTracerProvider(
      new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }),
    );
    expect(telemetry.enabled).toBe(true);
    const lease = { holdCount: 1 } as Lease;
    await expect(
      telemetry.acquire(target, 0, undefined, performance.now(), () => Promise.resolve(lease)),
    ).resolves.toBe(lease);
    expect(exporter.getFinishedSpans().map((span) => span.name)).toEqual(['latchkey.acquire']);
  });

  it('is on when a MeterProvider was registered before the client was made', () => {
    api.metrics.setGlobalMeterProvider(new MeterProvider());
    expect(createTelemetry(api).enabled).toBe(true);
  });

  it('is on for an API without the no-op meter to compare with', () => {
    const older = { trace: api.trace, metrics: api.metrics, SpanStatusCode: api.SpanStatusCode };
    expect(createTelemetry(older).enabled).toBe(true);
  });
});
