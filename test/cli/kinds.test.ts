/**
 * The CLI on every kind latchkey writes: what `inspect`, `list` and `watch` show for a semaphore,
 * a permit semaphore, a fair lock with a queued waiter, a read-write lock in read and in write
 * mode and a count-down latch, and what `force-unlock` does with the kinds that have no holders
 * to free.
 */
import { describe, expect, it } from 'vitest';
import { assertNoSecrets, describeRun, FROM_SOURCES, jsonLinesOf, jsonOf, runCli } from '../support/cli.js';
import { fairQueueOf } from '../support/keys.js';
import { sharedSuite } from '../support/shared-suite.js';
import { waitUntil, within } from '../support/wait.js';
import { prefixOf, secretsOf } from './fixtures.js';

interface Json {
  kind: string;
  candidates: string[];
  held: boolean;
  holders: { label: string | null; holdCount: number; role: string; leaseMs: number | null }[];
  ttlMs: number | null;
  mode: string | null;
  permits: { free: number | null; out: number; lapsed: number } | null;
  count: number | null;
  waiting: number;
  waiters: { position: number; deadlineMs: number | null; listening: boolean | null }[];
}

/** Generous: the first line waits for node and tsx to start, on a loaded two-core machine. */
const NEXT_TIMEOUT_MS = 60_000;

// Each test runs the CLI several times: node and tsx start slowly on a loaded two-core machine,
// so leases here are minutes long, to outlive the runs.
describe('latchkey on every kind', { timeout: 240_000 }, () => {
  const suite = sharedSuite('cli-kinds');

  /** `inspect` as text and as JSON, side by side. */
  async function inspect(handle: { key: string; name: string }, ...extra: string[]) {
    const args = ['inspect', handle.name, '--prefix', prefixOf(handle), '--url', suite.url, ...extra];
    // One after the other: each is a node process, and the machine may have two cores.
    const text = await runCli(args);
    const json = await runCli([...args, '--json']);
    expect(json.code, describeRun(json)).toBe(0);
    expect(text.code, describeRun(text)).toBe(0);
    return { text, json, parsed: jsonOf<Json>(json) };
  }

  it('force-unlock refuses a semaphore whose permits are all taken, and it keeps its limit', async () => {
    const locks = suite.lockClient();
    const pdf = locks.semaphore('pdf', { permits: 2 });
    await pdf.acquire();
    await suite.lockClient().semaphore('pdf', { permits: 2 }).acquire();

    const run = await runCli(['force-unlock', 'pdf', '--prefix', prefixOf(pdf), '--url', suite.url, '--yes']);

    expect(run.code, describeRun(run)).toBe(4);
    expect(run.stderr).toContain('Not force-unlocking semaphore "pdf"');
    expect(run.stderr).toContain('addPermits()');
    expect(await suite.admin.get(pdf.key)).toBe('0');
    // Both permits are still out: a third holder does not get in, nor do two more.
    expect(await suite.lockClient().semaphore('pdf', { permits: 2 }).tryAcquire(2)).toBe(false);
    expect(await suite.lockClient().semaphore('pdf', { permits: 2 }).tryAcquire(1)).toBe(false);
  });

  it('inspect shows a semaphore’s free permits, and says when a counter could be a latch', async () => {
    const pdf = suite.lockClient().semaphore('pdf', { permits: 2 });
    await pdf.acquire(2);
    const none = await inspect(pdf);
    // 0: a latch would have been deleted at zero, so only a semaphore (of either kind) is left.
    expect(none.parsed).toMatchObject({ kind: 'semaphore', held: false, permits: { free: 0, out: 0 } });
    expect(none.text.stdout).toMatch(/^kind\s+semaphore$/m);
    expect(none.text.stdout).toMatch(/^free\s+0 permits$/m);

    await pdf.release(1);
    const one = await inspect(pdf);
    expect(one.parsed).toMatchObject({
      kind: 'counter',
      count: 1,
      candidates: ['semaphore', 'permit-semaphore', 'count-down-latch'],
    });
    expect(one.text.stdout).toMatch(
      /^kind\s+counter: semaphore, permit semaphore with no permit out or count-down latch$/m,
    );
    expect(one.text.stdout).toMatch(/^value\s+1$/m);

    const told = await inspect(pdf, '--kind', 'semaphore');
    expect(told.parsed).toMatchObject({ kind: 'semaphore', candidates: [], permits: { free: 1 } });
  });

  it('inspect shows a permit semaphore’s free permits and each permit out with its lease', async () => {
    const crawler = suite.lockClient().permitSemaphore('crawler', { permits: 3 });
    await crawler.acquire({ leaseMs: 300_000 });
    await suite.lockClient().permitSemaphore('crawler', { permits: 3 }).acquire({ leaseMs: 150_000 });
    const secrets = await secretsOf(suite.admin, crawler.key);

    const { text, json, parsed } = await inspect(crawler);

    expect(parsed).toMatchObject({
      kind: 'permit-semaphore',
      held: true,
      permits: { free: 1, out: 2, lapsed: 0 },
    });
    expect(parsed.holders.map((holder) => holder.role)).toEqual(['permit', 'permit']);
    const leases = parsed.holders.map((holder) => holder.leaseMs ?? -1);
    expect(leases[0]).toBeGreaterThan(0);
    expect(leases[0]).toBeLessThanOrEqual(150_000);
    expect(leases[1]).toBeGreaterThan(150_000);
    expect(leases[1]).toBeLessThanOrEqual(300_000);
    // TTL: until the earliest lease ends.
    expect(parsed.ttlMs).toBe(leases[0]);
    expect(text.stdout).toMatch(/^kind\s+permit semaphore$/m);
    expect(text.stdout).toMatch(/^free\s+1$/m);
    expect(text.stdout).toMatch(/^holders\s+2$/m);
    expect(text.stdout).toMatch(/^ {2}[0-9a-f]{8} {2}permit {2}lease \d+ min \d+ s$/m);
    assertNoSecrets(text, secrets);
    assertNoSecrets(json, secrets);
  });

  it('inspect shows a fair lock’s queued waiter, its deadline and that it listens', async () => {
    const fair = suite.lockClient().fairLock('settlement');
    const lease = await fair.acquire({ leaseMs: 300_000 });
    const waiting = suite.lockClient().fairLock('settlement').acquire({ waitMs: 240_000, leaseMs: 5_000 });
    await waitUntil(
      'the waiter is queued',
      async () => (await suite.admin.lLen(fairQueueOf(fair.key))) === 1,
    );
    const secrets = await secretsOf(suite.admin, fair.key);

    const { text, json, parsed } = await inspect(fair);

    expect(parsed).toMatchObject({
      kind: 'fair-lock',
      held: true,
      holders: [{ holdCount: 1, role: 'owner' }],
      waiting: 1,
      waiters: [{ position: 1, listening: true }],
    });
    // The waiter keeps its place for a while yet, whichever deadline ends it first.
    expect(parsed.waiters[0]?.deadlineMs).toBeGreaterThan(1_000);
    expect(text.stdout).toMatch(/^kind\s+fair lock$/m);
    expect(text.stdout).toMatch(/^waiting\s+1$/m);
    expect(text.stdout).toMatch(/^ {4}1 {2}keeps its place for \S+( min \d+)? s {2}listening$/m);
    assertNoSecrets(text, secrets);
    assertNoSecrets(json, secrets);

    await lease.release();
    await (await waiting).release();
  });

  it('inspect shows a read-write lock’s readers with their leases, then its writer', async () => {
    const rw = suite.lockClient().readWriteLock('price-list');
    const first = await rw.readLock().acquire({ leaseMs: 300_000 });
    const second = await suite
      .lockClient()
      .readWriteLock('price-list')
      .readLock()
      .acquire({ leaseMs: 150_000 });
    const readSecrets = await secretsOf(suite.admin, rw.key);

    const read = await inspect(rw);
    expect(read.parsed).toMatchObject({ kind: 'read-write-lock', mode: 'read', held: true });
    expect(read.parsed.holders.map((holder) => [holder.role, holder.holdCount])).toEqual([
      ['reader', 1],
      ['reader', 1],
    ]);
    const leases = read.parsed.holders.map((holder) => holder.leaseMs ?? -1).sort((a, b) => a - b);
    expect(leases[0]).toBeGreaterThan(0);
    expect(leases[0]).toBeLessThanOrEqual(150_000);
    expect(leases[1]).toBeGreaterThan(150_000);
    expect(read.text.stdout).toMatch(/^kind\s+read-write lock$/m);
    expect(read.text.stdout).toMatch(/^mode\s+read$/m);
    expect(read.text.stdout).toMatch(/^ {2}[0-9a-f]{8} {2}reader {2}hold count 1 {2}lease \d+ min \d+ s$/m);
    assertNoSecrets(read.text, readSecrets);
    assertNoSecrets(read.json, readSecrets);

    await first.release();
    await second.release();
    const writer = await rw.writeLock().acquire({ leaseMs: 300_000 });
    const write = await inspect(rw);
    expect(write.parsed).toMatchObject({
      kind: 'read-write-lock',
      mode: 'write',
      holders: [{ role: 'writer', holdCount: 1, leaseMs: null }],
    });
    expect(write.text.stdout).toMatch(/^mode\s+write$/m);
    expect(write.text.stdout).toMatch(/^ {2}[0-9a-f]{8} {2}writer {2}hold count 1$/m);
    expect(write.text.stdout).toMatch(/^ttl\s+\d+ min \d+ s$/m);
    assertNoSecrets(write.text, await secretsOf(suite.admin, rw.key));
    await writer.release();
  });

  it('a count-down latch: a counter until a waiter listens on its channel, and force-unlock refuses it', async () => {
    const warmup = suite.lockClient().countDownLatch('warmup');
    expect(await warmup.trySetCount(3)).toBe(true);
    const alone = await inspect(warmup);
    expect(alone.parsed).toMatchObject({ kind: 'counter', count: 3 });

    const waiting = suite.lockClient().countDownLatch('warmup').await({ waitMs: 240_000 });
    await waitUntil(
      'the waiter listens',
      async () => (await suite.res.numsub(`redisson_countdownlatch__channel__{${warmup.key}}`)) > 0,
    );
    const heard = await inspect(warmup);
    expect(heard.parsed).toMatchObject({ kind: 'count-down-latch', count: 3, held: false, candidates: [] });
    expect(heard.text.stdout).toMatch(/^kind\s+count-down latch$/m);
    expect(heard.text.stdout).toMatch(/^count\s+3$/m);

    const refused = await runCli([
      'force-unlock',
      'warmup',
      '--prefix',
      prefixOf(warmup),
      '--url',
      suite.url,
      '--yes',
    ]);
    expect(refused.code, describeRun(refused)).toBe(4);
    expect(refused.stderr).toContain('Not force-unlocking count-down latch "warmup"');
    expect(refused.stderr).toContain('delete()');
    expect(await warmup.count()).toBe(3);

    for (let i = 0; i < 3; i += 1) await warmup.countDown();
    expect(await within(waiting, 5_000, 'the latch waiter')).toBe(true);
  });

  it('list --include-strings lists every kind, with its holders, waiters and count', async () => {
    const locks = suite.lockClient();
    const prefix = prefixOf(locks.lock('x'));
    await locks.fairLock('a-fair').acquire({ leaseMs: 300_000 });
    void suite
      .lockClient()
      .fairLock('a-fair')
      .acquire({ waitMs: 240_000, leaseMs: 5_000 })
      .catch(() => null);
    await locks.readWriteLock('b-rw').readLock().acquire({ leaseMs: 300_000 });
    await suite.lockClient().readWriteLock('b-rw').readLock().acquire({ leaseMs: 300_000 });
    await locks.permitSemaphore('c-permits', { permits: 3 }).acquire({ leaseMs: 300_000 });
    await locks.semaphore('d-sem', { permits: 2 }).acquire(2);
    await locks.countDownLatch('e-latch').trySetCount(2);
    await waitUntil(
      'the fair waiter is queued',
      async () => (await suite.admin.lLen(fairQueueOf(`${prefix}a-fair`))) === 1,
    );

    const json = await runCli([
      'list',
      '--prefix',
      prefix,
      '--url',
      suite.url,
      '--include-strings',
      '--json',
    ]);
    const text = await runCli(['list', '--prefix', prefix, '--url', suite.url, '--include-strings']);
    expect(json.code, describeRun(json)).toBe(0);
    const rows = jsonLinesOf<Json & { name: string }>(json);
    expect(rows.map((row) => [row.name, row.kind, row.holders.length, row.waiting]).sort()).toEqual([
      ['a-fair', 'fair-lock', 1, 1],
      ['b-rw', 'read-write-lock', 2, 0],
      ['c-permits', 'permit-semaphore', 1, 0],
      ['d-sem', 'semaphore', 0, 0],
      ['e-latch', 'counter', 0, 0],
    ]);
    expect(text.code, describeRun(text)).toBe(0);
    const lines = text.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^KIND\s+HOLDERS\s+TTL\s+WAITING\s+COUNT\s+NAME$/);
    expect(lines).toHaveLength(6);
    expect(lines.slice(1)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^fair lock +1 +\d+ min \d+ s +1 +- +a-fair$/),
        expect.stringMatching(/^read-write lock +2 read +\d+ min \d+ s +0 +- +b-rw$/),
        expect.stringMatching(/^permit semaphore +1 +\d+ min \d+ s +- +2 +c-permits$/),
        expect.stringMatching(/^semaphore +- +no expiry +- +0 +d-sem$/),
        expect.stringMatching(/^counter \(ambiguous\) +- +no expiry +- +2 +e-latch$/),
      ]),
    );
  });

  it('watch follows a semaphore’s free permits and a latch’s count', async () => {
    const pdf = suite.lockClient().semaphore('pdf', { permits: 2 });
    await pdf.availablePermits();
    const warmup = suite.lockClient().countDownLatch('warmup');
    await warmup.trySetCount(2);
    const start = (handle: { name: string; key: string }, kind: string) =>
      suite.res.spawn(process.execPath, [
        ...FROM_SOURCES,
        'watch',
        handle.name,
        '--prefix',
        prefixOf(handle),
        '--url',
        suite.url,
        '--json',
        '--kind',
        kind,
        '--interval',
        '100',
      ]);
    const semaphoreWatch = start(pdf, 'semaphore');
    const latchWatch = start(warmup, 'count-down-latch');

    expect(await semaphoreWatch.next((m) => m.event === 'initial', NEXT_TIMEOUT_MS)).toMatchObject({
      kind: 'semaphore',
      permits: { free: 2 },
    });
    expect(await latchWatch.next((m) => m.event === 'initial', NEXT_TIMEOUT_MS)).toMatchObject({
      kind: 'count-down-latch',
      count: 2,
    });
    await pdf.acquire();
    await warmup.countDown();
    expect(await semaphoreWatch.next((m) => m.event === 'change', NEXT_TIMEOUT_MS)).toMatchObject({
      kind: 'semaphore',
      permits: { free: 1 },
      changed: ['permits'],
    });
    expect(await latchWatch.next((m) => m.event === 'change', NEXT_TIMEOUT_MS)).toMatchObject({
      kind: 'count-down-latch',
      count: 1,
      changed: ['count'],
    });
    semaphoreWatch.kill('SIGINT');
    latchWatch.kill('SIGINT');
    expect(await within(semaphoreWatch.exited, 5_000, 'watch after SIGINT')).toEqual({
      code: 0,
      signal: null,
    });
    expect(await within(latchWatch.exited, 5_000, 'watch after SIGINT')).toEqual({ code: 0, signal: null });
  });
});
