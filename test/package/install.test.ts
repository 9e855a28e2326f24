import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { sharedRedis } from '../support/redis-server.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
// npm pack (with the tsup build in `prepare`) and an install from the npm cache: ~10 s alone,
// more on a busy machine.
const CHECK_TIMEOUT_MS = 90_000;

interface Outcome {
  readonly code: number | null;
  readonly output: string;
}

function checkInstall(way: 'tarball', redisUrl: string): Promise<Outcome> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['scripts/check-install.mjs', way],
      { cwd: ROOT, env: { ...process.env, REDIS_URL: redisUrl }, timeout: CHECK_TIMEOUT_MS },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : null;
        resolve({ code, output: `${stdout}\n${stderr}` });
      },
    );
  });
}

// The git install runs the same `prepare` in npm's own clone, but installs every dev dependency
// there (~30 s), so it runs in `npm run check:package` (CI) rather than here.
describe('installing the packed package into a new project', () => {
  let url: string;

  beforeAll(async () => {
    ({ url } = await sharedRedis());
  });

  it(
    'builds dist/ on npm pack, and the installed tarball takes a lock from import and from require',
    async () => {
      const { code, output } = await checkInstall('tarball', url);
      expect(code, output).toBe(0);
      expect(output).toContain('tarball: import works; took and released a lock');
      expect(output).toContain('tarball: require works; took and released a lock');
    },
    CHECK_TIMEOUT_MS + 5_000,
  );
});
