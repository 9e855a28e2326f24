/**
 * Vitest config of the least-privilege run that least-privilege.test.ts starts: the
 * integration suite, with latchkey and MONITOR swapped for the stand-ins in fixtures/ (see
 * acl-latchkey.ts) and acl-setup.ts loaded before each file. Not for running by hand.
 */
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import { standardDecorators } from '../support/standard-decorators.js';

const here = (path: string): string => fileURLToPath(new URL(path, import.meta.url));
const redisModule = process.env['LATCHKEY_TEST_REDIS_MODULE'];
const report = process.env['LATCHKEY_ACL_REPORT'];

export default defineConfig({
  root: here('../..'),
  plugins: [standardDecorators()],
  resolve: {
    alias: [
      // Exactly the specifier test/integration and test/support use; the stand-in itself
      // imports the real module as ../../../src/index.js.
      { find: /^\.\.\/\.\.\/src\/index\.js$/, replacement: here('./fixtures/acl-latchkey.ts') },
      { find: /^(?:\.\.\/support|\.)\/monitor\.js$/, replacement: here('./fixtures/acl-monitor.ts') },
      ...(redisModule === undefined ? [] : [{ find: /^redis$/, replacement: redisModule }]),
    ],
  },
  test: {
    include: ['test/integration/**/*.test.ts'],
    // telemetry-absent mocks how the engine loads @opentelemetry/api; here acl-setup.ts has
    // loaded the engine before any test file's mocks, so the mock cannot apply. Its lock commands
    // are the same as telemetry.test.ts's, which does run as the ACL user. stale-replica and
    // handover-replica move LockClients' connections, through a proxy, to a replica of a server
    // of their own, where the ACL user does not exist; the commands they send are those of each
    // kind's own test file and of handover.test.ts. handover-acl runs its LockClient as an ACL
    // user of its own, without PUBSUB; its other commands are those of handover.test.ts.
    // connection-reset-window resets a LockClient's connection in the instant a command is queued
    // and checks that latchkey withdraws its unwritten commands; here every latchkey command is
    // wrapped in AUTH commands that latchkey did not send and cannot withdraw. Its commands are
    // those of lock-api.test.ts.
    // redis-unreachable kills and restarts servers of its own, which come back without the ACL
    // user; its commands are those of each kind's own test file.
    exclude: [
      'test/integration/connection-reset-window.test.ts',
      'test/integration/redis-unreachable.test.ts',
      'test/integration/handover-acl.test.ts',
      'test/integration/telemetry-absent.test.ts',
      'test/integration/stale-replica.test.ts',
      'test/integration/handover-replica.test.ts',
    ],
    setupFiles: [here('./acl-setup.ts')],
    pool: 'forks',
    // One file at a time: every file here shares the one server of REDIS_URL, and the files that
    // check that bad input sends no command watch all of that server's traffic with MONITOR.
    maxWorkers: 1,
    reporters: report === undefined ? ['default'] : ['default', ['json', { outputFile: report }]],
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
