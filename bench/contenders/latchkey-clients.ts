// latchkey's reentrant lock on the other clients it takes: ioredis, iovalkey (Valkey's fork of
// ioredis) and a Valkey GLIDE standalone client, each with one LockClient per session as on
// node-redis (latchkey.ts). They run in the uncontended cycle and the hand-off only, so the
// report can set each client's figures beside latchkey's on node-redis; the clients are made as
// the test suites make them (test/support/clients.ts).
import { GlideClient } from '@valkey/valkey-glide';
import { Redis as IoRedis } from 'ioredis';
import { Redis as IoValkey } from 'iovalkey';
import { latchkeyRenewIntervalMs, latchkeySession } from './latchkey.js';
import type { Adapter, ContenderName, Session, SessionOptions } from './types.js';

/** The scenarios the client variants run in. */
export const CLIENT_SCENARIOS = ['uncontended', 'uncontended-distinct', 'handoff'] as const;

/**
 * GLIDE's own bound on each command (its `requestTimeout`), above LockClient's default
 * commandTimeoutMs (5 s) as latchkey's docs advise: GLIDE's default of 250 ms would fail
 * commands that latchkey still waits for on a busy machine.
 */
const GLIDE_REQUEST_TIMEOUT_MS = 10_000;

/** An ioredis or iovalkey client to `options.url`, connected (the two share one API). */
async function connectIoRedis(options: SessionOptions, valkey: boolean): Promise<Session> {
  const settings = { lazyConnect: true, connectionName: options.name };
  const redis = valkey ? new IoValkey(options.url, settings) : new IoRedis(options.url, settings);
  redis.on('error', () => undefined);
  await redis.connect();
  return latchkeySession(redis, () => redis.disconnect(), options);
}

async function connectGlide(options: SessionOptions): Promise<Session> {
  const url = new URL(options.url);
  const glide = await GlideClient.createClient({
    addresses: [{ host: url.hostname, port: Number(url.port || 6379) }],
    requestTimeout: GLIDE_REQUEST_TIMEOUT_MS,
    clientName: options.name,
  });
  return latchkeySession(glide, () => glide.close(), options);
}

function clientAdapter(name: ContenderName, connect: (options: SessionOptions) => Promise<Session>): Adapter {
  return {
    name,
    caps: { wait: 'pubsub', reentrant: true, renews: true, floor: false, scenarios: CLIENT_SCENARIOS },
    renewIntervalMs: latchkeyRenewIntervalMs,
    connect,
  };
}

export const latchkeyIoredis = clientAdapter('latchkey-ioredis', (options) => connectIoRedis(options, false));
export const latchkeyIovalkey = clientAdapter('latchkey-iovalkey', (options) =>
  connectIoRedis(options, true),
);
export const latchkeyGlide = clientAdapter('latchkey-glide', connectGlide);
