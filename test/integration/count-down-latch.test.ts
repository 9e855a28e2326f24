/**
 * The count-down latch against a real Redis: trySetCount / countDown / count / await / delete
 * in Redisson's layout, waiting woken by the latch channel (not by polling) in this process and
 * in another, every local waiter woken by one message, waitMs and abort ending a wait promptly,
 * an expiring latch re-read by its PTTL, bad input refused before any command, and a
 * count-down whose reply is lost on the network retried and counted once.
 */
import { describe, expect, it } from 'vitest';
import { ClientClosedError, InvalidArgumentError, LockClient } from '../../src/index.js';
import { luaScripts } from '../../src/scripts/generated.js';
import { startFaultProxy } from '../support/fault-proxy.js';
import { commandsFrom } from '../support/monitor.js';
import { sharedSuite } from '../support/shared-suite.js';
import { watchEventLoopDelay } from '../support/stamps.js';
import { settle, sleep, waitUntil, within } from '../support/wait.js';

const WAITER = new URL('../support/fixtures/latch-waiter.ts', import.meta.url).pathname;

/** The latch channel, spelt out here as Redisson's RCountDownLatch names it. */
function latchChannelOf(key: string): string {
  return `redisson_countdownlatch__channel__{${key}}`;
}

/** Slack for timers and round trips on a loaded machine. */
const SLACK_MS = 400;

describe('CountDownLatch', () => {
  const suite = sharedSuite('latch');
  const { res, lockClient } = suite;

  /** Messages published on the latch channel of `key`, in order. */
  async function listen(key: string): Promise<string[]> {
    const messages: string[] = [];
    const subscriber = await res.connect();
    await subscriber.subscribe(latchChannelOf(key), (message) => messages.push(message));
    return messages;
  }

  it('sets a count only when no latch exists, announces it with `1`, and keeps no expiry', async () => {
    const latch = lockClient().countDownLatch('warmup:eu');
    const messages = await listen(latch.key);

    expect(await latch.count()).toBe(0);
    expect(await latch.trySetCount(3)).toBe(true);
    expect(await suite.admin.get(latch.key)).toBe('3');
    expect(await suite.admin.pTTL(latch.key)).toBe(-1);
    expect(await latch.trySetCount(5)).toBe(false);
    expect(await suite.admin.get(latch.key)).toBe('3');
    expect(await latch.count()).toBe(3);
    await waitUntil('the new-count message arrived', () => messages.length === 1);
    await sleep(50);
    // The refused trySetCount announced nothing.
    expect(messages).toEqual(['1']);
  });

  it('counts down to zero, deletes the key and publishes `0` once; then a new count may be set', async () => {
    const latch = lockClient().countDownLatch('warmup:us');
    const messages = await listen(latch.key);
    await latch.trySetCount(2);

    expect(await latch.countDown()).toBe(1);
    expect(await latch.count()).toBe(1);
    expect(await latch.countDown()).toBe(0);
    expect(await suite.admin.exists(latch.key)).toBe(0);
    expect(await latch.count()).toBe(0);
    await waitUntil('the zero message arrived', () => messages.includes('0'));

    // Past zero: nothing to count down, nothing created, nothing announced.
    expect(await latch.countDown()).toBe(0);
    expect(await suite.admin.exists(latch.key)).toBe(0);
    expect(await latch.trySetCount(1)).toBe(true);
    await waitUntil('the second new-count message arrived', () => messages.length === 3);
    await sleep(50);
    expect(messages).toEqual(['1', '0', '1']);
  });

  it('counts down a latch left at zero or below by another client as Redisson does: deleted, not announced', async () => {
    const latch = lockClient().countDownLatch('warmup:ap');
    const messages = await listen(latch.key);
    await suite.admin.set(latch.key, '0');
    expect(await latch.count()).toBe(0);
    expect(await latch.await({ waitMs: 0 })).toBe(true);
    expect(await latch.countDown()).toBe(0);
    expect(await suite.admin.exists(latch.key)).toBe(0);
    await sleep(100);
    expect(messages).toEqual([]);
  });

  it('gives the latch key the lifetime ttlMs asks for, kept across count-downs', async () => {
    const latch = lockClient().countDownLatch('warmup:ttl');
    expect(await latch.trySetCount(3, { ttlMs: 60_000 })).toBe(true);
    expect(await suite.admin.pTTL(latch.key)).toBeGreaterThan(55_000);
    await latch.countDown();
    expect(await suite.admin.pTTL(latch.key)).toBeGreaterThan(55_000);
    expect(await suite.admin.get(latch.key)).toBe('2');
  });

  it('resolves await at once when the count is zero or the latch does not exist yet', async () => {
    const latch = lockClient().countDownLatch('warmup:none');
    expect(await latch.await()).toBe(true);
    expect(await latch.await({ waitMs: 0 })).toBe(true);
    await latch.trySetCount(1);
    expect(await latch.await({ waitMs: 0 })).toBe(false);
    await latch.countDown();
    expect(await latch.await({ waitMs: 0 })).toBe(true);
  });

  it('wakes an await in another process within milliseconds of the last countDown, with no polling meanwhile', async () => {
    const locks = lockClient();
    const latch = locks.countDownLatch('warmup:xproc');
    await latch.trySetCount(2);
    const prefix = latch.key.slice(0, -latch.name.length);
    const worker = res.worker(WAITER, { REDIS_URL: suite.url, KEY_PREFIX: prefix, LATCH_NAME: latch.name });
    await worker.next((msg) => msg['type'] === 'ready', 20_000);
    worker.send({ type: 'await', id: 1 });
    await waitUntil(
      'the worker is subscribed',
      async () => (await res.numsub(latchChannelOf(latch.key))) === 1,
      10_000,
    );
    // Let its post-subscribe read come back, so it is parked in its wait.
    await sleep(150);

    // A latch without expiry: a waiter that polled would read it during this second.
    const monitor = await res.monitor();
    await latch.countDown();
    await sleep(1_000);
    const stateSha = luaScripts['count-down-latch/state'].sha1;
    const reads = commandsFrom(monitor.lines, { excludeLua: true }).filter(
      (cmd) => (cmd[0] === 'EVALSHA' && cmd[1] === stateSha) || (cmd[0] === 'GET' && cmd[1] === latch.key),
    );
    expect(reads).toEqual([]);
    expect(worker.messages.some((msg) => msg['type'] === 'ended')).toBe(false);

    const ownDelay = watchEventLoopDelay();
    const lastCountDownNs = process.hrtime.bigint();
    expect(await latch.countDown()).toBe(0);
    const ended = await worker.next((msg) => msg['type'] === 'ended' || msg['type'] === 'failed');
    ownDelay.stop();
    expect(ended).toMatchObject({ type: 'ended', id: 1, opened: true });
    const latencyMs = Number(BigInt(String(ended['at'])) - lastCountDownNs) / 1e6;
    expect(latencyMs).toBeGreaterThan(0);
    // Far below any poll interval a waiter could use, and below the 1 s without reads above;
    // on a busy machine, plus what either process was held up by (108 ms seen at load 13).
    const heldUpMs = ownDelay.maxMs() + Number(ended['loopDelayMaxMs']);
    expect(latencyMs, `held up ${heldUpMs.toFixed(0)} ms`).toBeLessThan(100 + heldUpMs);
    worker.send({ type: 'exit' });
  });

  it('wakes every local waiter with one message, on one shared subscription', async () => {
    const locks = lockClient();
    const latch = locks.countDownLatch('warmup:many');
    const messages = await listen(latch.key);
    await latch.trySetCount(1);
    const waits = Array.from({ length: 6 }, () => settle(latch.await({ waitMs: 20_000 })));
    await waitUntil(
      'the waiters are subscribed',
      async () => (await res.numsub(latchChannelOf(latch.key))) === 2,
    );
    await sleep(150);

    const startedAt = performance.now();
    await locks.countDownLatch('warmup:many').countDown();
    const outcomes = await within(Promise.all(waits), 5_000, 'the waiters');
    for (const outcome of outcomes) {
      expect(outcome.value).toBe(true);
      expect(outcome.at - startedAt).toBeLessThan(SLACK_MS);
    }
    await sleep(50);
    expect(messages.filter((message) => message === '0')).toHaveLength(1);
  });

  it('keeps waiting through a message that changes nothing (a stray, a duplicate, a new count)', async () => {
    const latch = lockClient().countDownLatch('warmup:stray');
    await latch.trySetCount(2);
    let ended = false;
    const waiting = latch.await({ waitMs: 20_000 }).then((opened) => {
      ended = true;
      return opened;
    });
    await waitUntil(
      'the waiter is subscribed',
      async () => (await res.numsub(latchChannelOf(latch.key))) === 1,
    );
    await suite.admin.publish(latchChannelOf(latch.key), '0');
    await suite.admin.publish(latchChannelOf(latch.key), '0');
    await suite.admin.publish(latchChannelOf(latch.key), '1');
    await sleep(300);
    expect(ended).toBe(false);
    await latch.countDown();
    await latch.countDown();
    expect(await within(waiting, 5_000, 'the waiter')).toBe(true);
  });

  it('ends a wait at waitMs with false, and on abort at once with signal.reason', async () => {
    const latch = lockClient().countDownLatch('warmup:stuck');
    await latch.trySetCount(1);

    const startedAt = performance.now();
    const timedOut = await settle(latch.await({ waitMs: 300 }));
    expect(timedOut.value).toBe(false);
    expect(timedOut.at - startedAt).toBeGreaterThanOrEqual(290);
    expect(timedOut.at - startedAt).toBeLessThan(300 + SLACK_MS);

    const controller = new AbortController();
    const aborting = settle(latch.await({ signal: controller.signal }));
    await waitUntil(
      'the waiter is subscribed',
      async () => (await res.numsub(latchChannelOf(latch.key))) === 1,
    );
    const reason = new Error('shutting down');
    const abortedAt = performance.now();
    controller.abort(reason);
    const aborted = await aborting;
    expect(aborted.error).toBe(reason);
    expect(aborted.at - abortedAt).toBeLessThan(100);

    const already = await settle(latch.await({ signal: AbortSignal.abort(reason) }));
    expect(already.error).toBe(reason);
    expect(await suite.admin.get(latch.key)).toBe('1');
  });

  it('re-reads an expiring latch by its PTTL: the expiry, which announces nothing, opens it', async () => {
    const latch = lockClient().countDownLatch('warmup:abandoned');
    const messages = await listen(latch.key);
    await latch.trySetCount(3, { ttlMs: 800 });
    const startedAt = performance.now();
    const waiting = settle(latch.await({ waitMs: 20_000 }));
    const outcome = await within(waiting, 5_000, 'the waiter on an expiring latch');
    expect(outcome.value).toBe(true);
    expect(outcome.at - startedAt).toBeGreaterThanOrEqual(700);
    expect(outcome.at - startedAt).toBeLessThan(800 + SLACK_MS);
    expect(messages).toEqual(['1']);
  });

  it('deletes a latch, waking its waiters to a count of 0', async () => {
    const latch = lockClient().countDownLatch('warmup:cancelled');
    expect(await latch.delete()).toBe(false);
    await latch.trySetCount(4);
    const waiting = settle(latch.await({ waitMs: 20_000 }));
    await waitUntil(
      'the waiter is subscribed',
      async () => (await res.numsub(latchChannelOf(latch.key))) === 1,
    );
    const startedAt = performance.now();
    expect(await latch.delete()).toBe(true);
    const outcome = await within(waiting, 5_000, 'the waiter on a deleted latch');
    expect(outcome.value).toBe(true);
    expect(outcome.at - startedAt).toBeLessThan(SLACK_MS);
    expect(await suite.admin.exists(latch.key)).toBe(0);
  });

  it('rejects a wait when the client closes', async () => {
    const locks = lockClient();
    const latch = locks.countDownLatch('warmup:closing');
    await latch.trySetCount(1);
    const waiting = settle(latch.await());
    await waitUntil(
      'the waiter is subscribed',
      async () => (await res.numsub(latchChannelOf(latch.key))) === 1,
    );
    await locks.close();
    expect((await within(waiting, 5_000, 'the waiter')).error).toBeInstanceOf(ClientClosedError);
    expect((await settle(latch.countDown())).error).toBeInstanceOf(ClientClosedError);
  });

  it('refuses bad input with a clear message before sending any command', async () => {
    const latch = lockClient().countDownLatch('warmup:bad');
    const monitor = await res.monitor();
    const refused = async (call: () => Promise<unknown>, message: RegExp): Promise<void> => {
      const outcome = await settle(call());
      expect(outcome.error).toBeInstanceOf(InvalidArgumentError);
      expect((outcome.error as Error).message).toMatch(message);
    };
    const anyLatch = latch as unknown as {
      trySetCount(count: unknown, options?: unknown): Promise<boolean>;
      await(options?: unknown): Promise<boolean>;
    };
    await refused(
      () => anyLatch.trySetCount(0),
      /^Expected `count` to be a whole number from 1 .*got `0` \(number\)$/,
    );
    await refused(() => anyLatch.trySetCount(-1), /`count`.*got `-1` \(number\)/);
    await refused(() => anyLatch.trySetCount(1.5), /`count`.*got `1.5` \(number\)/);
    await refused(() => anyLatch.trySetCount('3'), /`count`.*got "3" \(string of length 1\)/);
    await refused(() => anyLatch.trySetCount(Number.NaN), /`count`/);
    await refused(() => anyLatch.trySetCount(2 ** 60), /`count`/);
    await refused(
      () => anyLatch.trySetCount(2, { ttlMs: 0 }),
      /^Expected `ttlMs` to be a whole number of milliseconds from 1/,
    );
    await refused(() => anyLatch.trySetCount(2, { ttlMs: Number.POSITIVE_INFINITY }), /`ttlMs`/);
    await refused(() => anyLatch.trySetCount(2, { ttl: 5 }), /^Unknown option `ttl`/);
    await refused(() => anyLatch.trySetCount(2, 5), /options object/);
    await refused(
      () => anyLatch.await({ waitMs: -1 }),
      /^Expected `waitMs` to be a whole number of milliseconds from 0/,
    );
    await refused(() => anyLatch.await({ waitMs: 1.5 }), /`waitMs`/);
    await refused(() => anyLatch.await({ signal: 'stop' }), /^Expected `signal` to be an AbortSignal/);
    await refused(() => anyLatch.await({ timeout: 5 }), /^Unknown option `timeout`/);
    await refused(() => anyLatch.await(null), /options object/);
    expect(() => lockClient().countDownLatch('')).toThrow(InvalidArgumentError);

    // A command sent afterwards shows up, so the monitor was watching all along.
    await suite.admin.get(`${latch.key}:probe`);
    await monitor.waitFor((lines) => lines.some((line) => line.includes(`${latch.key}:probe`)));
    // Nothing else reached the server meanwhile: no command of the latch, and no version check.
    expect(monitor.lines.filter((line) => !line.includes(':probe'))).toEqual([]);
    expect(await suite.admin.exists(latch.key)).toBe(0);
  });

  it('counts a countDown once when its reply is lost on the network and it is retried', async () => {
    const { hostname, port } = new URL(suite.url);
    const proxy = await startFaultProxy({ targetHost: hostname, targetPort: Number(port) });
    try {
      // Loaded once here, so the copy held up by the proxy runs as it is sent.
      await suite.admin.sendCommand(['SCRIPT', 'LOAD', luaScripts['count-down-latch/count-down'].source]);
      const direct = lockClient().countDownLatch('warmup:lossy');
      await direct.trySetCount(3);
      const prefix = direct.key.slice(0, -direct.name.length);
      const overProxy = res.track(
        new LockClient(await res.connectLocks({ url: proxy.url }), {
          keyPrefix: prefix,
          commandTimeoutMs: 3_000,
        }),
      );
      const latch = overProxy.countDownLatch('warmup:lossy');
      expect(await latch.count()).toBe(3);
      const monitor = await res.monitor();

      proxy.setLatency(300);
      const counting = settle(latch.countDown());
      await waitUntil('the count-down has run', async () => (await suite.admin.get(latch.key)) === '2');
      // Its reply is still held in the proxy: the connection goes down with it.
      proxy.setLatency(0);
      expect(proxy.resetAll()).toBeGreaterThanOrEqual(1);
      const counted = await within(counting, 10_000, 'the count-down whose reply was lost');
      expect(counted.error).toBeUndefined();
      expect(counted.value).toBe(2);
      expect(await suite.admin.get(latch.key)).toBe('2');

      const sha = luaScripts['count-down-latch/count-down'].sha1;
      await monitor.waitFor(
        (lines) =>
          commandsFrom(lines, { excludeLua: true }).filter((cmd) => cmd[1] === sha && cmd[3] === latch.key)
            .length >= 2,
      );
      const copies = commandsFrom(monitor.lines, { excludeLua: true }).filter(
        (cmd) => cmd[1] === sha && cmd[3] === latch.key,
      );
      // The same request both times (same request key), and one DECR among the scripts' effects.
      expect(new Set(copies.map((cmd) => cmd[4])).size).toBe(1);
      const decrements = commandsFrom(monitor.lines, { clientAddr: 'lua' }).filter(
        (cmd) => cmd[0] === 'decr' && cmd[1] === latch.key,
      );
      expect(decrements).toHaveLength(1);
      // A copy arriving later still changes nothing, and answers as the first did.
      const [copy] = copies;
      if (copy === undefined) throw new Error('no copy of the count-down was seen');
      expect(await suite.admin.sendCommand(copy)).toBe(2);
      expect(await suite.admin.get(latch.key)).toBe('2');
      // The request record expires: nothing it writes stays.
      const requestKey = copy[4] ?? '';
      expect(requestKey).toContain(`{${latch.key}}`);
      const recordTtl = Number(await suite.admin.pTTL(requestKey));
      expect(recordTtl).toBeGreaterThan(0);
      expect(recordTtl).toBeLessThanOrEqual(20_000);
    } finally {
      await proxy.close();
    }
  });
});
