import { describe, expect, it } from 'vitest';
import { assertNoSecrets, describeRun, jsonOf, runCli } from '../support/cli.js';
import { sharedSuite } from '../support/shared-suite.js';
import { holdNested, prefixOf, secretsOf, waitForQueue } from './fixtures.js';

interface InspectJson {
  name: string;
  key: string;
  kind: string;
  held: boolean;
  holders: { label: string | null; holdCount: number }[];
  ttlMs: number | null;
  fencingToken: string | null;
  waiting: number;
  waiters: { position: number; leaseMs: number | null; listening: boolean | null }[];
  redisType: string;
}

// Each test runs the CLI, whose node and tsx start slowly on a loaded two-core machine.
// Leases are minutes long, to outlive the CLI runs of a test.
describe('latchkey inspect', { timeout: 120_000 }, () => {
  const suite = sharedSuite('cli-inspect');

  /** `inspect` as text and as JSON, run side by side. */
  async function inspect(handle: { key: string; name: string }) {
    const args = ['inspect', handle.name, '--prefix', prefixOf(handle), '--url', suite.url];
    const [text, json] = await Promise.all([runCli(args), runCli([...args, '--json'])]);
    return { text, json, parsed: json.stdout === '' ? undefined : jsonOf<InspectJson>(json) };
  }

  it('shows a reentrant lock: kind, hold count, TTL and queued waiters, and no owner field', async () => {
    const holder = suite.lockClient().lock('invoice:42');
    const hold = await holdNested(holder, 2, { leaseMs: 300_000 });
    // A waiter of another client queues in Redis.
    const waiting = suite
      .lockClient()
      .lock('invoice:42')
      .acquire({ waitMs: 30_000, leaseMs: 7_000 })
      .catch(() => null);
    await waitForQueue(suite.admin, holder.key, 1);
    const secrets = await secretsOf(suite.admin, holder.key);

    const { text, json, parsed } = await inspect(holder);

    expect(json.code, describeRun(json)).toBe(0);
    expect(parsed).toMatchObject({
      name: 'invoice:42',
      key: holder.key,
      kind: 'lock',
      held: true,
      fencingToken: null,
      waiting: 1,
      waiters: [{ position: 1, leaseMs: 7_000, listening: true }],
      redisType: 'hash',
    });
    expect(parsed?.holders).toHaveLength(1);
    expect(parsed?.holders[0]?.label).toMatch(/^[0-9a-f]{8}$/);
    expect(parsed?.holders[0]?.holdCount).toBe(2);
    expect(parsed?.ttlMs).toBeGreaterThan(150_000);
    expect(parsed?.ttlMs).toBeLessThanOrEqual(300_000);

    expect(text.code, describeRun(text)).toBe(0);
    expect(text.stdout).toMatch(/^kind\s+lock$/m);
    expect(text.stdout).toMatch(/^holders\s+1$/m);
    expect(text.stdout).toMatch(/^ {2}[0-9a-f]{8} {2}hold count 2$/m);
    expect(text.stdout).toMatch(/^ttl\s+\d min \d+ s$/m);
    expect(text.stdout).toMatch(/^waiting\s+1$/m);
    expect(text.stdout).toMatch(/^\s+1 {2}lease 7000 ms {2}listening$/m);
    assertNoSecrets(text, secrets);
    assertNoSecrets(json, secrets);
    // A label means something within one run only: two runs label the same owner differently.
    expect(text.stdout).not.toContain(parsed?.holders[0]?.label);

    await hold.release();
    expect(await waiting).not.toBeNull();
  });

  it('says "lock (fenced)" with the fencing token, and shows the last token once it is free', async () => {
    const fenced = suite.lockClient().fencedLock('ledger:7');
    await (await fenced.acquire()).release();
    const lease = await fenced.acquire({ leaseMs: 300_000 });
    const secrets = await secretsOf(suite.admin, fenced.key);

    const held = await inspect(fenced);
    expect(held.json.code, describeRun(held.json)).toBe(0);
    expect(held.parsed).toMatchObject({ kind: 'fenced-lock', held: true, fencingToken: String(lease.token) });
    expect(held.parsed?.holders).toHaveLength(1);
    expect(held.parsed?.holders[0]?.label).toMatch(/^[0-9a-f]{8}$/);
    expect(held.parsed?.holders[0]?.holdCount).toBe(1);
    expect(held.text.stdout).toMatch(/^kind\s+lock \(fenced\)$/m);
    expect(held.text.stdout).toMatch(new RegExp(`^token\\s+${lease.token}$`, 'm'));
    assertNoSecrets(held.text, secrets);
    assertNoSecrets(held.json, secrets);

    await lease.release();
    const free = await inspect(fenced);
    expect(free.json.code, describeRun(free.json)).toBe(1);
    expect(free.parsed).toMatchObject({
      kind: 'free',
      held: false,
      holders: [],
      fencingToken: String(lease.token),
    });
    expect(free.text.code).toBe(1);
    expect(free.text.stdout).toMatch(/^kind\s+free$/m);
    expect(free.text.stdout).toMatch(new RegExp(`^token\\s+${lease.token} \\(last issued\\)$`, 'm'));
  });

  it('shows a simple lock as held, never its token', async () => {
    const simple = suite.lockClient().simpleLock('reports:nightly');
    await simple.acquire({ leaseMs: 300_000 });
    const secrets = await secretsOf(suite.admin, simple.key);

    const { text, json, parsed } = await inspect(simple);
    expect(json.code, describeRun(json)).toBe(0);
    expect(parsed).toMatchObject({
      kind: 'simple-lock',
      held: true,
      holders: [{ label: null, holdCount: 1 }],
      fencingToken: null,
      redisType: 'string',
    });
    expect(parsed?.ttlMs).toBeGreaterThan(150_000);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^kind\s+simple lock$/m);
    expect(text.stdout).toContain('held (the token is not shown)');
    assertNoSecrets(text, secrets);
    assertNoSecrets(json, secrets);
  });

  it('exits 1 for a free lock and for a key that holds something else', async () => {
    const free = suite.lockClient().lock('invoice:404');
    const prefix = prefixOf(free);
    const missing = await inspect(free);
    expect(missing.json.code, describeRun(missing.json)).toBe(1);
    expect(missing.parsed).toMatchObject({ kind: 'free', held: false, ttlMs: null, waiting: 0 });

    await suite.admin.rPush(`${prefix}inbox`, 'message');
    await suite.admin.hSet(`${prefix}customer:9`, { email: 'ada@example.com', plan: 'pro' });
    for (const name of ['inbox', 'customer:9']) {
      const run = await runCli(['inspect', name, '--prefix', prefix, '--url', suite.url, '--json']);
      expect(run.code, describeRun(run)).toBe(1);
      expect(jsonOf<InspectJson>(run)).toMatchObject({ kind: 'not-a-lock', held: false, holders: [] });
    }
    // Field values of a hash that is no lock are not shown either.
    const text = await runCli(['inspect', 'customer:9', '--prefix', prefix, '--url', suite.url]);
    expect(text.stdout).toMatch(/^kind\s+not a lock \(a hash\)$/m);
    expect(text.stdout + text.stderr).not.toContain('ada@example.com');
  });
});
