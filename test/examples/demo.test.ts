/**
 * `REDIS_URL=… npm run demo` end to end: examples/demo.ts runs every example, each in a process of
 * its own, against a server this test starts, as a newcomer's first command does against theirs.
 * Each example checks its own claims and exits non-zero if one fails; this test also checks that
 * the output shows them, and that the demo leaves that server as it found it.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectNodeRedis, type NodeRedis } from '../support/clients.js';
import { startRedis, type RedisInstance } from '../support/redis-server.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
// The examples take ~30 s in all on an idle machine, and three minutes were seen on a 2-core one
// at load 20; this only catches a demo that hangs (the demo stops an example after 3 minutes).
const DEMO_TIMEOUT_MS = 10 * 60_000;
/**
 * The longest a latchkey retry record lives (a permit semaphore's release record; the other
 * kinds' are shorter): the one kind of key an example may leave, since it expires on its own.
 */
const REQUEST_RECORD_TTL_MS = 60_000;

interface KeyLeft {
  readonly key: string;
  readonly pttlMs: number;
}

/** The keys in the server, with their PTTL (-1: no expiry); one that expired meanwhile is gone. */
async function keysLeft(redis: NodeRedis): Promise<KeyLeft[]> {
  const keys = await redis.keys('*');
  const left = await Promise.all(keys.map(async (key) => ({ key, pttlMs: await redis.pTTL(key) })));
  return left.filter(({ pttlMs }) => pttlMs !== -2);
}

function runDemo(url: string): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'examples/demo.ts'], {
    cwd: ROOT,
    env: { ...process.env, REDIS_URL: url },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, output })));
}

/** The part of the demo's output that one example printed. */
function section(output: string, name: string): string {
  const start = output.search(new RegExp(`── \\d+/\\d+ {2}${name} `));
  if (start === -1) return '';
  const end = output.indexOf('\n── ', start + 1);
  return output.slice(start, end === -1 ? undefined : end);
}

describe('npm run demo', () => {
  let server: RedisInstance | undefined;
  let redis: NodeRedis | undefined;
  let keysBefore: number;
  let left: KeyLeft[];
  let run: { code: number | null; output: string };

  beforeAll(async () => {
    server = await startRedis();
    redis = await connectNodeRedis({ url: server.url });
    keysBefore = await redis.dbSize();
    run = await runDemo(server.url);
    left = await keysLeft(redis);
  }, DEMO_TIMEOUT_MS);

  afterAll(async () => {
    await redis?.close();
    await server?.stop();
  });

  it('runs every example, and every one passes', () => {
    expect(run.code, run.output).toBe(0);
    expect(run.output).toContain('All 10 examples passed.');
  });

  it('leaves the Redis it ran against as it found it: only retry records that expire within a minute', () => {
    expect(keysBefore).toBe(0);
    // A key that never expires stays in the user's Redis for good.
    expect(left.filter(({ pttlMs }) => pttlMs === -1)).toEqual([]);
    // Anything else an example wrote is its own to delete; latchkey's records of retried
    // requests are the library's, and go by themselves.
    const records = /^latchkey_request:\{examples:[0-9a-f]+:[^}]+\}:[0-9a-f]+$/;
    expect(left.filter(({ key }) => !records.test(key))).toEqual([]);
    for (const { key, pttlMs } of left) {
      expect(pttlMs, key).toBeGreaterThanOrEqual(0);
      expect(pttlMs, key).toBeLessThanOrEqual(REQUEST_RECORD_TTL_MS);
    }
  });

  it('rate-limited-crawler: never over the host limit, and a crashed worker’s permit comes back', () => {
    const crawl = section(run.output, 'rate-limited-crawler');
    expect(crawl, run.output).toContain('was killed (SIGKILL) mid-fetch: 2 of 3 permits free.');
    expect(crawl).toMatch(
      /Most fetches at once: 3\. The crashed worker's permit came back \d+ ms after the kill/,
    );
    expect(crawl).toContain('all 3 permits are free again.');
    expect(crawl).not.toContain('in flight: 4');
  });

  it('coupon-claim: shows the overselling without a lock beside the exact sale with latchkey', () => {
    const coupons = section(run.output, 'coupon-claim');
    const round1 = coupons.slice(coupons.indexOf('Round 1, WITHOUT a lock'), coupons.indexOf('Round 2'));
    const round2 = coupons.slice(coupons.indexOf('Round 2, WITH latchkey'));
    expect(round1, coupons).toMatch(/^Round 1, WITHOUT a lock/);
    // Overselling is a race, so the example allows for a round the timing let through.
    expect(round1).toMatch(/OVERSOLD: \d+ claims for 20 coupons|the timing let it through/);
    expect(round2, coupons).toMatch(/^Round 2, WITH latchkey/);
    expect(round2).toContain('coupons sold more than once: 0; stock left: 0');
    expect(round2).toContain('Sold out exactly: 20 claims, each coupon once.');
  });

  it('warmup-latch: the storefront opens once the last shard is warm, woken by the message', () => {
    const warmup = section(run.output, 'warmup-latch');
    expect(warmup, run.output).toContain(
      'second storefront instance: trySetCount -> false (already counting)',
    );
    expect(warmup).toMatch(/warmer \w+ +done, 0 shard\(s\) to go/);
    expect(warmup).toMatch(/The storefront opened \d+\.\d ms after the last shard was warm/);
  });

  it('batch-job-watchdog: the PTTL column shows renewals, and a force-unlocked job starts no further batch', () => {
    const batch = section(run.output, 'batch-job-watchdog');
    expect(batch, run.output).toContain('PTTL now');
    expect(batch).toMatch(/\d+\/8 +\d+ ms +\d+ ms +↑+ renewed/);
    expect(batch).toMatch(/the watchdog renewed the lock \d+ times/);
    expect(batch).toMatch(/operator: forceUnlock\(\) -> true, while batch 3 runs/);
    expect(batch).toMatch(/lease\.signal aborted: batch [45]\/8 not started/);
    expect(batch).toMatch(/job stopped after batch [34]\/8, with LockLostError/);
    expect(batch).not.toContain('batch 8/8 exported');
  });

  it('ordered-settlement: payments queue while the ledger is closed and settle in arrival order', () => {
    const settlement = section(run.output, 'ordered-settlement');
    expect(settlement, run.output).toContain('in line: 6');
    expect(settlement).toMatch(/1\. pay-001[\s\S]*2\. pay-002[\s\S]*3\. ref-001[\s\S]*6\. pay-004/);
    expect(settlement).toContain('Every payment settled in arrival order; every refund after its payment.');
  });
});
