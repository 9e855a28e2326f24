import { describe, expect, it } from 'vitest';
import { assertNoSecrets, describeRun, FROM_SOURCES, runCli, type CliRun } from '../support/cli.js';
import { CLI_KINDS } from '../support/kinds.js';
import { sharedSuite } from '../support/shared-suite.js';
import { within } from '../support/wait.js';
import { CLI_KIND_OF, prefixOf, secretsOf, waitForQueue } from './fixtures.js';

/** Generous: the first line waits for node and tsx to start, on a loaded two-core machine. */
const NEXT_TIMEOUT_MS = 20_000;

interface WatchJson {
  event: 'initial' | 'change';
  changed: string[];
  kind: string;
  held: boolean;
  holders: { label: string | null; holdCount: number }[];
  waiting: number;
}

// Each test runs the CLI, whose node and tsx start slowly on a loaded two-core machine.
describe('latchkey watch', { timeout: 120_000 }, () => {
  const suite = sharedSuite('cli-watch');

  /** `watch --json` as a worker: its JSON lines arrive as messages while it runs. */
  function startWatch(handle: { key: string; name: string }, ...extra: string[]) {
    return suite.res.spawn(process.execPath, [
      ...FROM_SOURCES,
      'watch',
      handle.name,
      '--prefix',
      prefixOf(handle),
      '--url',
      suite.url,
      '--json',
      ...extra,
    ]);
  }

  /** The worker's output as a CliRun, for assertNoSecrets and messages. */
  function asRun(worker: ReturnType<typeof startWatch>, code: number | null): CliRun {
    const stdout = [...worker.messages.map((message) => JSON.stringify(message)), ...worker.logs].join('\n');
    return { code, signal: null, stdout, stderr: worker.stderr, elapsedMs: 0 };
  }

  it.each(CLI_KINDS)('reports the release of a $name, then stops after --count lines', async (kind) => {
    const handle = kind.handle(suite.lockClient(), 'invoice:42');
    const lease = await handle.acquire({ leaseMs: 300_000 });
    const secrets = await secretsOf(suite.admin, handle.key);
    const watch = startWatch(handle, '--count', '2', '--interval', '100');

    const initial = (await watch.next((m) => m.event === 'initial', NEXT_TIMEOUT_MS)) as unknown as WatchJson;
    expect(initial).toMatchObject({
      kind: CLI_KIND_OF[kind.name].held,
      held: true,
      holders: [{ holdCount: 1 }],
      changed: [],
    });
    await lease.release();
    const change = (await watch.next((m) => m.event === 'change', NEXT_TIMEOUT_MS)) as unknown as WatchJson;
    expect(change).toMatchObject({ kind: CLI_KIND_OF[kind.name].released, held: false, holders: [] });
    expect(change.changed).toContain('holders');

    const exit = await within(watch.exited, 5_000, 'watch --count 2');
    expect(exit.code, watch.stderr).toBe(0);
    assertNoSecrets(asRun(watch, exit.code), secrets);
  });

  it('reports a hand-over as a change of holder and queue, and stops on Ctrl-C with exit 0', async () => {
    const holder = suite.lockClient().lock('invoice:43');
    const lease = await holder.acquire({ leaseMs: 300_000 });
    const waiting = suite.lockClient().lock('invoice:43').acquire({ waitMs: 120_000, leaseMs: 300_000 });
    await waitForQueue(suite.admin, holder.key, 1);
    // The queue entry holds the waiter's owner field, which the hand-over makes the holder's.
    const secrets = await secretsOf(suite.admin, holder.key);
    const watch = startWatch(holder);

    const initial = (await watch.next((m) => m.event === 'initial', NEXT_TIMEOUT_MS)) as unknown as WatchJson;
    expect(initial).toMatchObject({ kind: 'lock', waiting: 1 });
    await lease.release();
    await waiting;
    const change = (await watch.next((m) => m.event === 'change', NEXT_TIMEOUT_MS)) as unknown as WatchJson;
    // Handed straight over: never free in between, another owner, nobody waiting.
    expect(change).toMatchObject({ kind: 'lock', held: true, waiting: 0 });
    expect(change.changed).toEqual(expect.arrayContaining(['holders', 'waiting']));
    expect(change.holders[0]?.label).not.toBe(initial.holders[0]?.label);

    watch.kill('SIGINT');
    const exit = await within(watch.exited, 5_000, 'watch after SIGINT');
    expect(exit).toEqual({ code: 0, signal: null });
    assertNoSecrets(asRun(watch, exit.code), secrets);
  });

  it('prints the current state as text and stops after --duration', async () => {
    const lock = suite.lockClient().fencedLock('ledger:7');
    const lease = await lock.acquire({ leaseMs: 300_000 });
    const run = await runCli([
      'watch',
      'ledger:7',
      '--prefix',
      prefixOf(lock),
      '--url',
      suite.url,
      '--duration',
      '500',
    ]);
    expect(run.code, describeRun(run)).toBe(0);
    const lines = run.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      new RegExp(
        `^\\d\\d:\\d\\d:\\d\\d\\.\\d{3} {2}lock \\(fenced\\) {2}holders [0-9a-f]{8}×1 {2}ttl \\d min \\d+ s {2}token ${lease.token} {2}waiting 0$`,
      ),
    );
  });
});
