import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Each test file runs in its own process and starts its own redis-server; two at a time
    // fits a two-core machine without starving the timing-sensitive tests.
    pool: 'forks',
    maxWorkers: 2,
    // The JSON report lets .ci/run print a plain "N passed, N failed" line.
    reporters: ['default', ['json', { outputFile: '.tmp/vitest-results.json' }]],
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
