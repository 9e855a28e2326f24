import { defineConfig } from 'vitest/config';
import { standardDecorators } from './test/support/standard-decorators.js';

// LATCHKEY_TEST_REDIS_MODULE points `redis` at another node-redis major (CI runs the suite on
// v5, the dev dependency, and again on v6, which speaks RESP3 by default);
// LATCHKEY_TEST_IOREDIS_MODULE does the same for `ioredis` (v6, the dev dependency, and v5).
const redisModule = process.env.LATCHKEY_TEST_REDIS_MODULE;
const ioredisModule = process.env.LATCHKEY_TEST_IOREDIS_MODULE;
// The least-privilege run repeats the whole integration suite as an ACL user, which takes
// minutes: it runs on its own (`npm run test:acl`, a step of .ci/run), not in `npm test`.
const withAcl = process.env.LATCHKEY_TEST_ACL === '1';

export default defineConfig({
  plugins: [standardDecorators()],
  resolve: {
    alias: {
      ...(redisModule ? { redis: redisModule } : {}),
      ...(ioredisModule ? { ioredis: ioredisModule } : {}),
    },
  },
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['**/node_modules/**', ...(withAcl ? [] : ['test/chaos/least-privilege.test.ts'])],
    // Checks once that Redis can be had, so that a machine without it gets one message.
    globalSetup: ['test/support/global-setup.ts'],
    // Each test file runs in its own process and starts its own redis-server. Most of a file's
    // time is spent waiting (on leases, timers, failovers, child processes), so three files at a
    // time keep a two-core machine busy: `npm test` takes about 8 minutes there instead of 12.
    // Timing margins come from what each test measures (its event loop's delay, the lease), and
    // `npm run test:loaded` runs the suite so on a machine made busy besides.
    pool: 'forks',
    maxWorkers: 3,
    // The JSON report lets .ci/run print a plain "N passed, N failed" line.
    reporters: ['default', ['json', { outputFile: '.tmp/vitest-results.json' }]],
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
