/**
 * The test harness on a machine without Redis: vitest's global set-up (test/support/
 * global-setup.ts) prints how to get Redis once and ends the run, before any test file starts
 * a server — rather than every file printing the same guidance and tearing down what it never
 * started. Runs vitest in a child process whose PATH holds only `node`.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const VITEST = join(ROOT, 'node_modules', 'vitest', 'vitest.mjs');
// Two files that need a server of their own, and one that uses the shared one.
const FILES = [
  'test/integration/harness.test.ts',
  'test/integration/script-flush.test.ts',
  'test/integration/lock-api.test.ts',
];
const GUIDANCE = 'latchkey tests need a real Redis server (never a mock)';
// Vitest itself starts in a second or two; every file starting would take far longer.
const FAST_MS = 15_000;

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

  it('prints the guidance once, runs no test file and exits 1 quickly', async (context) => {
    if (docker) context.skip('a Docker engine answers here, so the harness would use it');
    const startedAt = performance.now();
    // The default reporter only: the JSON report file belongs to the run this test is part of.
    const child = spawn(process.execPath, [VITEST, 'run', ...FILES, '--reporter=default'], {
      cwd: ROOT,
      env: { PATH: bin, HOME: tmpdir(), CI: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
    const tookMs = performance.now() - startedAt;

    expect(code, output).toBe(1);
    expect(output.split(GUIDANCE).length - 1, output).toBe(1);
    expect(output).toContain('apt-get install -y redis-server');
    expect(output).not.toContain('TypeError');
    expect(output).not.toMatch(/Test Files/);
    expect(tookMs).toBeLessThan(FAST_MS);
  }, 30_000);
});
