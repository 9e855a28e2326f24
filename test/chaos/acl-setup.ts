/**
 * Setup file of the least-privilege run (acl.config.ts), loaded before each integration test
 * file. Worker processes the tests spawn against the run's server connect as the ACL user
 * (they use that connection for latchkey only), and after each file what latchkey did in it
 * is written out for least-privilege.test.ts to check.
 */
import childProcess from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { join } from 'node:path';
import { afterAll, expect } from 'vitest';
import { isBundle } from '../support/bundles.js';
import { capture } from './fixtures/acl-latchkey.js';
import {
  ACL_PASSWORD,
  ACL_SERVER_ENV,
  ACL_USER,
  CAPTURE_DIR_ENV,
  type AclCapture,
} from './fixtures/acl-user.js';

const serverUrl = process.env[ACL_SERVER_ENV];
const captureDir = process.env[CAPTURE_DIR_ENV];
if (serverUrl === undefined || captureDir === undefined) {
  throw new Error(
    `acl-setup.ts needs ${ACL_SERVER_ENV} and ${CAPTURE_DIR_ENV}; run it through least-privilege.test.ts`,
  );
}

const SPAWN_PATCHED = Symbol.for('latchkey.test.acl-spawn');

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

function patchSpawn(url: string): void {
  const original = childProcess.spawn;
  if (Reflect.get(original, SPAWN_PATCHED) === true) return;
  const asUser = new URL(url);
  asUser.username = ACL_USER;
  asUser.password = ACL_PASSWORD;
  const patched = function spawn(this: unknown, ...params: unknown[]): unknown {
    const [, args, options] = params;
    const env = isRecord(options) ? options['env'] : undefined;
    // spawnWorker() runs fixtures as `node <bundle>` or `node --import tsx <script>`
    // (test/support/child.ts, bundles.ts).
    if (
      Array.isArray(args) &&
      args.some((arg) => arg === 'tsx' || (typeof arg === 'string' && isBundle(arg))) &&
      isRecord(options) &&
      isRecord(env) &&
      env['REDIS_URL'] === url
    ) {
      params[2] = { ...options, env: { ...env, REDIS_URL: asUser.toString() } };
      capture.workers += 1;
    }
    return Reflect.apply(original, this, params);
  };
  Reflect.set(patched, SPAWN_PATCHED, true);
  childProcess.spawn = patched as typeof childProcess.spawn;
  // `import { spawn } from 'node:child_process'` elsewhere sees the patched function too.
  syncBuiltinESMExports();
}

patchSpawn(serverUrl);

afterAll(() => {
  const out: AclCapture = {
    file: expect.getState().testPath ?? 'unknown',
    clientIds: [...capture.clientIds],
    texts: capture.texts,
    commandsAsUser: capture.commandsAsUser,
    fallbacks: capture.fallbacks,
    unlimited: capture.unlimited,
    noperm: capture.noperm,
    workers: capture.workers,
  };
  mkdirSync(captureDir, { recursive: true });
  writeFileSync(
    join(captureDir, `${process.pid}-${randomBytes(4).toString('hex')}.json`),
    JSON.stringify(out),
  );
});
