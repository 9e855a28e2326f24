/**
 * The test harness on a machine without Redis: vitest's global set-up (test/support/
 * global-setup.ts) prints how to get Redis once; each file that needs Redis then fails with one
 * line, without tearing down what it never started, and tests that need no Redis still pass.
 * Runs vitest in a child process whose PATH holds only `node`.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DOCKER_PROBE_LINE, TRACE_DOCKER_PROBES_ENV } from '../support/redis-server.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const VITEST = join(ROOT, 'node_modules', 'vitest', 'vitest.mjs');
// Two files that need a server of their own, one that uses the shared one, one without Redis.
const FILES = [
  'test/integration/harness.test.ts',
  'test/integration/script-flush.test.ts',
  'test/integration/lock-api.test.ts',
  'test/unit/keys.test.ts',
];
const GUIDANCE = 'latchkey tests need a real Redis server (never a mock)';
const ONE_LINE = 'Error: No Redis for this test: see the message at the start of the run';
// Only a guard against a hang: the nested vitest run takes about 10 s on a quiet machine, and
// several times that on a busy one.
const NESTED_RUN_MS = 150_000;

/** Whether a Docker engine answers, as the harness would find it (then it has Redis after all). */
async function dockerAnswers(): Promise<boolean> {
  try {
    await (await import('testcontainers')).getContainerRuntimeClient();
    return true;
  } catch {
    return false;
  }
}

describe('the harness without redis-server, Docker or REDIS_URL', () => {
  let bin: string;
  let docker: boolean;

  beforeAll(async () => {
    bin = mkdtempSync(join(tmpdir(), 'latchkey-no-redis-'));
    symlinkSync(process.execPath, join(bin, 'node'));
    docker = await dockerAnswers();
  });

  afterAll(() => {
    rmSync(bin, { recursive: true, force: true });
  });

  it(
    'prints the guidance once, then each Redis file fails in one line; the rest pass',
    async (context) => {
      if (docker) context.skip('a Docker engine answers here, so the harness would use it');
      // The default reporter only: the JSON report file belongs to the run this test is part of.
      const child = spawn(process.execPath, [VITEST, 'run', ...FILES, '--reporter=default'], {
        cwd: ROOT,
        env: { PATH: bin, HOME: tmpdir(), CI: '1', [TRACE_DOCKER_PROBES_ENV]: '1' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
      child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
      const code = await new Promise<number | null>((resolve) => child.once('close', resolve));

      const plain = output.replace(/\x1b\[[0-9;]*m/g, '');
      expect(code, plain).toBe(1);
      expect(plain.split(GUIDANCE).length - 1, plain).toBe(1);
      expect(plain).toContain('apt-get install -y redis-server');
      // harness.test.ts has two suites that need Redis; the other two files one each.
      expect(plain.split(ONE_LINE).length - 1, plain).toBe(4);
      expect(plain).not.toContain('TypeError');
      expect(plain).toMatch(/✓ test\/unit\/keys\.test\.ts/);
      expect(plain).toMatch(/Test Files +3 failed \| 1 passed \(4\)/);
      // The global set-up looked for Docker once; no file looked again (several seconds apiece).
      expect(plain.split(DOCKER_PROBE_LINE).length - 1, plain).toBe(1);
    },
    NESTED_RUN_MS,
  );
});
