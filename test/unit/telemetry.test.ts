// The telemetry loader and the telemetry that reports nothing, without Redis: latchkey must load
// and work where `@opentelemetry/api` is missing, too old or broken.
import { readFileSync } from 'node:fs';
import * as installedApi from '@opentelemetry/api';
import { describe, expect, it } from 'vitest';
import {
  createTelemetry,
  LIBRARY_VERSION,
  loadOpenTelemetry,
  NO_TELEMETRY,
  openTelemetry,
} from '../../src/engine/telemetry.js';
import type { Hold } from '../../src/engine/holds/hold.js';
import type { Lease } from '../../src/engine/lease.js';
import type { Protocol, Target } from '../../src/engine/types.js';

function notFound(id: string): never {
  throw Object.assign(new Error(`Cannot find module '${id}'`), { code: 'MODULE_NOT_FOUND' });
}

describe('telemetry loader', () => {
  it('reports the version in package.json', () => {
    const manifest = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      version: string;
    };
    expect(LIBRARY_VERSION).toBe(manifest.version);
  });

  it('finds the installed @opentelemetry/api from the package itself', () => {
    const loaded = loadOpenTelemetry();
    expect(loaded).toBeDefined();
    // The same copy an application would import: its global providers are the ones it set.
    expect(loaded?.trace.getTracerProvider()).toBe(installedApi.trace.getTracerProvider());
    expect(openTelemetry()).toBe(openTelemetry());
  });

  it('gives undefined when the API is not installed, instead of throwing', () => {
    const asked: string[] = [];
    expect(
      loadOpenTelemetry((id) => {
        asked.push(id);
        return notFound(id);
      }),
    ).toBeUndefined();
    expect(asked).toEqual(['@opentelemetry/api']);
  });

  it('gives undefined for an API that throws while loading or lacks what latchkey uses', () => {
    expect(
      loadOpenTelemetry(() => {
        throw new SyntaxError('Unexpected token');
      }),
    ).toBeUndefined();
    expect(loadOpenTelemetry(() => undefined)).toBeUndefined();
    // Before 1.3 the API had no metrics.
    expect(
      loadOpenTelemetry(() => ({ trace: installedApi.trace, SpanStatusCode: installedApi.SpanStatusCode })),
    ).toBe(undefined);
    expect(
      loadOpenTelemetry(() => ({
        trace: installedApi.trace,
        metrics: installedApi.metrics,
        SpanStatusCode: installedApi.SpanStatusCode,
      })),
    ).toBeDefined();
  });
});

describe('telemetry without the API', () => {
  const protocol = { kind: 'lock' } as Protocol;
  const target: Target = { name: 'invoice:42', key: 'invoice:42', channel: 'unused', protocol };
  const hold = { name: target.name, target, count: 1, acquiredAt: 1_000 } as unknown as Hold;

  it('is the telemetry that reports nothing', () => {
    expect(createTelemetry(undefined)).toBe(NO_TELEMETRY);
    expect(createTelemetry(loadOpenTelemetry(notFound))).toBe(NO_TELEMETRY);
    expect(NO_TELEMETRY.enabled).toBe(false);
    expect(Object.isFrozen(NO_TELEMETRY)).toBe(true);
  });

  it('passes acquire and release calls through unchanged, results and errors alike', async () => {
    const lease = { holdCount: 1 } as Lease;
    await expect(NO_TELEMETRY.acquire(target, 0, undefined, 0, () => Promise.resolve(lease))).resolves.toBe(
      lease,
    );
    await expect(
      NO_TELEMETRY.acquire(target, 0, undefined, 0, () => Promise.resolve(null)),
    ).resolves.toBeNull();
    const failure = new Error('connection lost');
    await expect(NO_TELEMETRY.acquire(target, 10, undefined, 0, () => Promise.reject(failure))).rejects.toBe(
      failure,
    );
    await expect(NO_TELEMETRY.release(hold, () => Promise.resolve())).resolves.toBeUndefined();
    await expect(NO_TELEMETRY.release(hold, () => Promise.reject(failure))).rejects.toBe(failure);
  });

  it('records nothing on a hold', () => {
    NO_TELEMETRY.waiting(target, 1);
    NO_TELEMETRY.lost(hold, 'expired');
    NO_TELEMETRY.renewalFailed(protocol, 3);
    NO_TELEMETRY.ended(hold);
    expect(hold.acquiredAt).toBe(1_000);
  });
});
