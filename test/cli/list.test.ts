import { describe, expect, it } from 'vitest';
import { assertNoSecrets, describeRun, jsonLinesOf, runCli } from '../support/cli.js';
import { commandsFrom } from '../support/monitor.js';
import { sharedSuite } from '../support/shared-suite.js';
import { prefixOf, secretsOf } from './fixtures.js';

interface ListJson {
  name: string;
  key: string;
  kind: string;
  held: boolean;
  holders: unknown[];
  waiting: number;
}

// Each test runs the CLI, whose node and tsx start slowly on a loaded two-core machine.
describe('latchkey list', { timeout: 120_000 }, () => {
  const suite = sharedSuite('cli-list');

  /** One lock of each kind under the test's prefix, and keys that are no locks beside them. */
  async function populate() {
    const locks = suite.lockClient();
    const lock = locks.lock('orders:1');
    const fenced = locks.fencedLock('orders:2');
    const simple = locks.simpleLock('orders:3');
    await lock.acquire({ leaseMs: 300_000 });
    await fenced.acquire({ leaseMs: 300_000 });
    await simple.acquire({ leaseMs: 300_000 });
    const prefix = prefixOf(lock);
    await suite.admin.hSet(`${prefix}customer:9`, { email: 'ada@example.com' });
    await suite.admin.set(`${prefix}visits`, '12');
    const secrets = (
      await Promise.all([lock, fenced, simple].map((handle) => secretsOf(suite.admin, handle.key)))
    ).flat();
    return { prefix, secrets };
  }

  it('lists the locks under a prefix with SCAN, never KEYS', async () => {
    const { prefix, secrets } = await populate();
    const monitor = await suite.res.monitor();

    // COUNT 2 makes the walk take several SCAN calls.
    const json = await runCli([
      'list',
      '--prefix',
      prefix,
      '--url',
      suite.url,
      '--json',
      '--scan-count',
      '2',
    ]);
    expect(json.code, describeRun(json)).toBe(0);
    const rows = jsonLinesOf<ListJson>(json);
    expect(rows.map((row) => [row.name, row.kind, row.holders.length]).sort()).toEqual([
      ['orders:1', 'lock', 1],
      ['orders:2', 'fenced-lock', 1],
    ]);
    expect(rows.every((row) => row.key === prefix + row.name && row.held)).toBe(true);

    await monitor.waitFor((lines) => lines.some((line) => /"SCAN"/i.test(line)));
    const commands = commandsFrom(monitor.lines).map((args) => args.map((arg) => arg.toUpperCase()));
    const scans = commands.filter((args) => args[0] === 'SCAN');
    expect(scans.length).toBeGreaterThan(1);
    for (const scan of scans) {
      expect(scan).toEqual(expect.arrayContaining(['MATCH', `${prefix}*`.toUpperCase(), 'TYPE', 'HASH']));
    }
    expect(commands.filter((args) => args[0] === 'KEYS')).toEqual([]);
    assertNoSecrets(json, secrets);
  });

  it('with --include-strings, lists simple locks and counters too, but not latchkey’s own keys', async () => {
    const { prefix, secrets } = await populate();
    // Neither a number nor a token, and no TTL: no kind writes that.
    await suite.admin.set(`${prefix}greeting`, 'hello');

    const text = await runCli(['list', '--prefix', prefix, '--url', suite.url, '--include-strings']);
    expect(text.code, describeRun(text)).toBe(0);
    const lines = text.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^KIND\s+HOLDERS\s+TTL\s+WAITING\s+COUNT\s+NAME$/);
    expect(lines).toHaveLength(5);
    expect(lines.slice(1)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^lock {2,}1 +\d min \d+ s +0 +- +orders:1$/),
        expect.stringMatching(/^lock \(fenced\) +1 +\d min \d+ s +0 +- +orders:2$/),
        expect.stringMatching(/^simple lock +1 +\d min \d+ s +0 +- +orders:3$/),
        // A number without TTL may be a semaphore's or a latch's counter: the CLI says it cannot tell.
        expect.stringMatching(/^counter \(ambiguous\) +- +no expiry +- +12 +visits$/),
      ]),
    );
    assertNoSecrets(text, secrets);

    // Matching the prefix anywhere also matches the fenced lock's token counter
    // (redisson_lock_token:{<key>}), a string: it is not a lock and is not listed.
    const anywhere = await runCli([
      'list',
      '--pattern',
      `*${prefix}*`,
      '--url',
      suite.url,
      '--include-strings',
      '--json',
    ]);
    expect(anywhere.code, describeRun(anywhere)).toBe(0);
    expect(
      jsonLinesOf<ListJson>(anywhere)
        .map((row) => row.key)
        .sort(),
    ).toEqual([`${prefix}orders:1`, `${prefix}orders:2`, `${prefix}orders:3`, `${prefix}visits`]);
  });

  it('matches --pattern against names, and takes the prefix literally', async () => {
    const { prefix } = await populate();
    const byPattern = await runCli([
      'list',
      '--prefix',
      prefix,
      '--pattern',
      'orders:[23]',
      '--url',
      suite.url,
      '--json',
    ]);
    expect(byPattern.code, describeRun(byPattern)).toBe(0);
    expect(jsonLinesOf<ListJson>(byPattern).map((row) => row.name)).toEqual(['orders:2']);

    // A prefix with glob characters matches only itself.
    const starred = suite.lockClient({ keyPrefix: `${prefix}team*:` }).lock('orders:9');
    const plain = suite.lockClient({ keyPrefix: `${prefix}teams:` }).lock('orders:8');
    await starred.acquire({ leaseMs: 300_000 });
    await plain.acquire({ leaseMs: 300_000 });
    const literal = await runCli(['list', '--prefix', `${prefix}team*:`, '--url', suite.url, '--json']);
    expect(literal.code, describeRun(literal)).toBe(0);
    expect(jsonLinesOf<ListJson>(literal).map((row) => row.key)).toEqual([starred.key]);

    const none = await runCli(['list', '--prefix', `${prefix}nothing:`, '--url', suite.url]);
    expect(none.code, describeRun(none)).toBe(0);
    expect(none.stdout).toBe('');
    expect(none.stderr).toContain('No locks match');
  });
});
