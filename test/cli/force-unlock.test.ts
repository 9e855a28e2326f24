import { spawn, spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { FencedLease } from '../../src/index.js';
import {
  assertNoSecrets,
  describeRun,
  FROM_SOURCES,
  jsonOf,
  PROJECT_ROOT,
  runCli,
  type CliRun,
} from '../support/cli.js';
import { onProcessExit } from '../support/cleanup.js';
import { CLI_KINDS } from '../support/kinds.js';
import { sharedSuite } from '../support/shared-suite.js';
import { within } from '../support/wait.js';
import { prefixOf, secretsOf, waitForQueue } from './fixtures.js';

/** util-linux `script` runs a command on a pseudo-terminal: the only way to test the question. */
const HAS_SCRIPT = spawnSync('script', ['--version'], { stdio: 'ignore' }).status === 0;

function shellQuote(arg: string): string {
  return `'${arg.replaceAll("'", `'\\''`)}'`;
}

/**
 * Runs the CLI on a terminal (through `script`), waits for its question, types `answer` and
 * collects the run. The terminal echoes, so stdout holds the question and the answer too.
 */
function runOnTerminal(args: readonly string[], answer: string): Promise<CliRun> {
  const commandLine = [process.execPath, ...FROM_SOURCES, ...args].map(shellQuote).join(' ');
  const env = { ...process.env };
  delete env.REDIS_URL;
  const started = performance.now();
  const child = spawn('script', ['-qefc', commandLine, '/dev/null'], { cwd: PROJECT_ROOT, env });
  const pid = child.pid;
  const unregister = onProcessExit(() => {
    if (pid !== undefined) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Gone already.
      }
    }
  });
  const killer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  let stdout = '';
  let stderr = '';
  let answered = false;
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
    if (!answered && stdout.includes('Type the lock name to confirm:')) {
      answered = true;
      child.stdin.write(answer);
    }
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  child.stdin.on('error', () => {});
  return new Promise<CliRun>((resolve) => {
    child.once('close', (code, signal) => {
      clearTimeout(killer);
      unregister();
      resolve({ code, signal, stdout, stderr, elapsedMs: performance.now() - started });
    });
  });
}

// Each test runs the CLI, whose node and tsx start slowly on a loaded two-core machine.
describe('latchkey force-unlock', { timeout: 120_000 }, () => {
  const suite = sharedSuite('cli-force-unlock');

  describe.each(CLI_KINDS)('$name', (kind) => {
    it('with --yes, frees the lock and a waiting acquire then gets it', async () => {
      const holder = kind.handle(suite.lockClient(), 'invoice:42');
      const held = await holder.acquire({ leaseMs: 300_000 });
      const waiter = kind.handle(suite.lockClient(), 'invoice:42');
      const waiting = waiter.acquire({ waitMs: 120_000, leaseMs: 300_000 });
      if (kind.handsOver) await waitForQueue(suite.admin, holder.key, 1);
      const secrets = await secretsOf(suite.admin, holder.key);

      const run = await runCli([
        'force-unlock',
        'invoice:42',
        '--prefix',
        prefixOf(holder),
        '--url',
        suite.url,
        '--yes',
      ]);

      expect(run.code, describeRun(run)).toBe(0);
      expect(run.stdout).toMatch(
        /^Force-unlocked (lock|lock \(fenced\)|fair lock|read-write lock|simple lock|permit semaphore) "invoice:42"\./,
      );
      // The queued waiter was handed the lock by the same script that deleted it.
      if (kind.handsOver) expect(run.stdout).toContain('It is held again');
      // A queued waiter is handed the lock at once; a simple lock's waiter re-checks soon.
      const lease = await within(waiting, 5_000, 'the waiting acquire');
      expect(lease.released).toBe(false);
      if (held instanceof FencedLease && lease instanceof FencedLease) {
        expect(lease.token).toBeGreaterThan(held.token);
      }
      assertNoSecrets(run, secrets);
    });
  });

  it('prints the outcome as JSON with --json', async () => {
    const lock = suite.lockClient().fencedLock('ledger:7');
    await lock.acquire({ leaseMs: 300_000 });
    const run = await runCli([
      'force-unlock',
      'ledger:7',
      '--prefix',
      prefixOf(lock),
      '--url',
      suite.url,
      '--yes',
      '--json',
    ]);
    expect(run.code, describeRun(run)).toBe(0);
    expect(jsonOf(run)).toMatchObject({
      name: 'ledger:7',
      key: lock.key,
      kind: 'fenced-lock',
      unlocked: true,
      after: { kind: 'free', held: false },
    });
    expect(await suite.admin.exists(lock.key)).toBe(0);
  });

  it('refuses without --yes when stdin is not a terminal (exit 4), and leaves the lock alone', async () => {
    const lock = suite.lockClient().lock('invoice:43');
    await lock.acquire({ leaseMs: 300_000 });
    const before = await suite.admin.hGetAll(lock.key);

    const run = await runCli(['force-unlock', 'invoice:43', '--prefix', prefixOf(lock), '--url', suite.url], {
      stdin: 'invoice:43\n',
    });

    expect(run.code, describeRun(run)).toBe(4);
    expect(run.stderr).toContain('stdin is not a terminal');
    expect(run.stderr).toContain('--yes');
    expect(await suite.admin.hGetAll(lock.key)).toEqual(before);
  });

  it.skipIf(!HAS_SCRIPT)('on a terminal, unlocks only when the name is typed back', async () => {
    const lock = suite.lockClient().simpleLock('reports:nightly');
    await lock.acquire({ leaseMs: 300_000 });
    const args = ['force-unlock', 'reports:nightly', '--prefix', prefixOf(lock), '--url', suite.url];
    const token = await suite.admin.get(lock.key);

    const wrong = await runOnTerminal(args, 'reports\r');
    expect(wrong.code, describeRun(wrong)).toBe(4);
    expect(wrong.stdout).toContain('Not confirmed');
    // Ctrl-C at the question is a "no" too.
    const interrupted = await runOnTerminal(args, '\x03');
    expect(interrupted.code, describeRun(interrupted)).toBe(4);
    expect(await suite.admin.get(lock.key)).toBe(token);

    const right = await runOnTerminal(args, 'reports:nightly\r');
    expect(right.code, describeRun(right)).toBe(0);
    expect(right.stdout).toContain('Force-unlocked simple lock "reports:nightly"');
    expect(await suite.admin.exists(lock.key)).toBe(0);
    for (const run of [wrong, interrupted, right]) assertNoSecrets(run, [token ?? '']);
  });

  it('exits 1 for a free lock, and never deletes a key that is no lock', async () => {
    const free = suite.lockClient().lock('invoice:404');
    const prefix = prefixOf(free);
    const missing = await runCli([
      'force-unlock',
      'invoice:404',
      '--prefix',
      prefix,
      '--url',
      suite.url,
      '--yes',
    ]);
    expect(missing.code, describeRun(missing)).toBe(1);
    expect(missing.stderr).toContain('Nothing to unlock');

    await suite.admin.hSet(`${prefix}customer:9`, { email: 'ada@example.com' });
    const other = await runCli([
      'force-unlock',
      'customer:9',
      '--prefix',
      prefix,
      '--url',
      suite.url,
      '--yes',
    ]);
    expect(other.code, describeRun(other)).toBe(1);
    expect(other.stderr).toContain('not a lock');
    expect(await suite.admin.hGetAll(`${prefix}customer:9`)).toEqual({ email: 'ada@example.com' });
  });
});
