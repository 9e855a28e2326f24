/**
 * RedlockClient over 3 and 5 independent masters, all running: a lock is an RLock hash on every
 * master; release and renewal reach every master; two clients exclude each other (checked by
 * an enter/exit log); a waiter wakes on the masters' unlock messages; bad input is refused
 * before any command; re-entry is refused; `await using` releases; masters reached by different
 * client libraries make one Redlock.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  ClientClosedError,
  InvalidArgumentError,
  LockError,
  LockReentryError,
  LockTimeoutError,
  RedlockClient,
} from '../../src/index.js';
import { connectClient, destroyClient, interceptCommands, type LockConnection } from '../support/clients.js';
import { startFaultProxy } from '../support/fault-proxy.js';
import { uniquePrefix } from '../support/keys.js';
import { ExclusionLog, startMasters, type Masters } from '../support/masters.js';
import { sleep, waitUntil, within } from '../support/wait.js';

/** Short leases so renewal is exercised within a test; per-master timeouts far below them. */
const OPTIONS = { watchdogTimeoutMs: 1_500, nodeTimeoutMs: 100, retryDelayMs: 100 } as const;
/**
 * For a test of what lies on every master: a master that misses its timeout is given up on, and
 * a grant it makes late is undone, so a busy machine could leave one master without the hold. A
 * timeout no master misses there, and a lease long enough for it.
 */
const EVERY_MASTER = { watchdogTimeoutMs: 10_000, nodeTimeoutMs: 1_000 } as const;

/** Resolves once every master holds `key`: a grant after the quorum's joins within a call. */
function heldEverywhere(masters: Masters, key: string): Promise<void> {
  return waitUntil(
    `"${key}" is held on every master`,
    async () => {
      const found = await Promise.all(masters.admin.map((admin) => admin.sendCommand(['EXISTS', key])));
      return found.every((reply) => Number(reply) === 1);
    },
    2 * EVERY_MASTER.nodeTimeoutMs,
  );
}

describe.each([3, 5])('Redlock on %i masters', (count) => {
  let masters: Masters;
  const clients: RedlockClient[] = [];
  const open = async (options: object = OPTIONS): Promise<RedlockClient> => {
    const client = new RedlockClient(await masters.connect(), { ...OPTIONS, ...options });
    clients.push(client);
    return client;
  };

  /**
   * Every master has dropped `key` within `withinMs` of the release resolving: by default a lease
   * and two calls, so a master whose release was given up on may let the hold expire instead,
   * while one the watchdog still renews (never released) stays and fails the test.
   */
  const goneEverywhere = (
    key: string,
    withinMs: number = OPTIONS.watchdogTimeoutMs + 2 * OPTIONS.nodeTimeoutMs,
  ): Promise<void> =>
    waitUntil(
      `"${key}" is gone from every master`,
      async () => {
        const found = await Promise.all(masters.admin.map((admin) => admin.sendCommand(['EXISTS', key])));
        return found.every((reply) => Number(reply) === 0);
      },
      withinMs,
    );

  beforeAll(async () => {
    masters = await startMasters(count);
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((client) => client.close()));
    masters.closeClients();
  });
  afterAll(async () => {
    await masters.stop();
  });

  it('stores an RLock hash on every master and deletes it on release', async () => {
    const locks = await open({ ...EVERY_MASTER, keyPrefix: uniquePrefix('redlock') });
    expect(locks.quorum).toBe(Math.floor(count / 2) + 1);
    const lock = locks.lock('payout:1');
    const lease = await lock.acquire();
    // The acquire resolves once a quorum granted; a later grant joins the lease within a call.
    await heldEverywhere(masters, lock.key);
    for (const admin of masters.admin) {
      const hash = await admin.sendCommand<string[]>(['HGETALL', lock.key]);
      expect(hash).toHaveLength(2);
      expect(hash[1]).toBe('1');
      expect(Number(await admin.sendCommand(['PTTL', lock.key]))).toBeGreaterThan(0);
    }
    await lease.release();
    // The release resolves once a quorum confirmed; the other masters follow within a call, well
    // before the lease could end.
    await goneEverywhere(lock.key, 2 * EVERY_MASTER.nodeTimeoutMs);
    await expect(lease.release()).rejects.toThrow(LockError);
  });

  it('renews on every master past several leases, without loss', async () => {
    const locks = await open({ keyPrefix: uniquePrefix('redlock') });
    const lost: unknown[] = [];
    locks.on('lockLost', (event) => lost.push(event));
    const lease = await locks.lock('payout:2').acquire();
    await sleep(OPTIONS.watchdogTimeoutMs * 2.5);
    expect(lease.signal.aborted).toBe(false);
    expect(lost).toEqual([]);
    for (const admin of masters.admin) {
      const pttl = Number(await admin.sendCommand(['PTTL', lease.key]));
      expect(pttl).toBeGreaterThan(0);
      expect(pttl).toBeLessThanOrEqual(OPTIONS.watchdogTimeoutMs);
    }
    await lease.release();
  });

  it('refuses a held lock to another client, and times out within its bound', async () => {
    const prefix = uniquePrefix('redlock');
    const a = await open({ keyPrefix: prefix });
    const b = await open({ keyPrefix: prefix });
    const lease = await a.lock('payout:3').acquire();
    expect(await b.lock('payout:3').tryAcquire()).toBeNull();
    const startedAt = performance.now();
    const error: unknown = await b
      .lock('payout:3')
      .acquire({ waitMs: 400 })
      .catch((e: unknown) => e);
    const tookMs = performance.now() - startedAt;
    expect(error).toBeInstanceOf(LockTimeoutError);
    expect(tookMs).toBeGreaterThanOrEqual(390);
    expect(tookMs).toBeLessThan(400 + 2 * OPTIONS.nodeTimeoutMs + 200);
    await lease.release();
  });

  it('keeps two clients mutually exclusive (enter/exit log)', async () => {
    const prefix = uniquePrefix('redlock');
    const a = await open({ keyPrefix: prefix });
    const b = await open({ keyPrefix: prefix });
    const log = new ExclusionLog();
    const rounds = 15;
    const worker = async (client: RedlockClient): Promise<void> => {
      for (let i = 0; i < rounds; i += 1) {
        await client.lock('ledger').withLock(async () => {
          log.enter();
          await sleep(3);
          log.exit();
        });
      }
    };
    await within(Promise.all([worker(a), worker(b), worker(a), worker(b)]), 25_000, 'contended workers');
    expect(log.entries).toBe(4 * rounds);
    expect(log.overlaps).toBe(0);
  });

  it('wakes a waiter on an unlock message rather than its retry delay', async () => {
    const prefix = uniquePrefix('redlock');
    const a = await open({ keyPrefix: prefix });
    // A retry delay far longer than the test's bound: only a message can wake the waiter in time.
    const b = await open({ keyPrefix: prefix, retryDelayMs: 10_000 });
    const lease = await a.lock('payout:4').acquire();
    const waiting = b.lock('payout:4').acquire({ waitMs: 8_000 });
    await sleep(300);
    const releasedAt = performance.now();
    await lease.release();
    const second = await waiting;
    expect(performance.now() - releasedAt).toBeLessThan(1_000);
    await second.release();
  });

  it('wakes a waiter whose round met a release still on its way to some masters', async () => {
    // The holder reaches every master but the first through a slow link, so its release frees
    // the first master well before the others. The waiter, woken by the first master's unlock
    // message, takes that master and is refused by the rest: a split vote, whose pause must still
    // end on the other masters' unlock messages, not after its 5-10 s retry delay.
    const proxies = await Promise.all(
      masters.servers
        .slice(1)
        .map((server) => startFaultProxy({ targetHost: '127.0.0.1', targetPort: server.port })),
    );
    const [first] = await masters.connect();
    const slow = await Promise.all(proxies.map((proxy) => connectClient({ url: proxy.url })));
    try {
      const prefix = uniquePrefix('redlock');
      const a = new RedlockClient([first!, ...slow], {
        ...OPTIONS,
        keyPrefix: prefix,
        watchdogTimeoutMs: 10_000,
        nodeTimeoutMs: 1_000,
      });
      clients.push(a);
      const b = await open({ keyPrefix: prefix, retryDelayMs: 10_000 });
      const lease = await a.lock('payout:8').acquire();
      const waiting = b.lock('payout:8').acquire({ waitMs: 8_000 });
      await sleep(300);
      for (const proxy of proxies) proxy.setLatency(150);
      const releasedAt = performance.now();
      await lease.release();
      const second = await waiting;
      expect(performance.now() - releasedAt).toBeLessThan(1_500);
      await second.release();
      await goneEverywhere(second.key);
    } finally {
      await Promise.all(clients.splice(0).map((client) => client.close()));
      for (const client of slow) destroyClient(client);
      await Promise.all(proxies.map((proxy) => proxy.close()));
    }
  });

  it('stops a waiting acquire at once on abort and on close, leaving no hold behind', async () => {
    const prefix = uniquePrefix('redlock');
    const a = await open({ keyPrefix: prefix });
    const b = await open({ keyPrefix: prefix, retryDelayMs: 10_000 });
    const lease = await a.lock('payout:7').acquire();
    const controller = new AbortController();
    const reason = new Error('caller gave up');
    const aborted = b.lock('payout:7').acquire({ signal: controller.signal });
    await sleep(200);
    let at = performance.now();
    controller.abort(reason);
    await expect(aborted).rejects.toBe(reason);
    expect(performance.now() - at).toBeLessThan(100);
    const closing = b.lock('payout:7').acquire();
    await sleep(200);
    at = performance.now();
    await b.close();
    await expect(closing).rejects.toBeInstanceOf(ClientClosedError);
    expect(performance.now() - at).toBeLessThan(2 * OPTIONS.nodeTimeoutMs + 200);
    await lease.release();
    await goneEverywhere(lease.key);
  });

  it('refuses re-entry from its own withLock, and releases on `await using`', async () => {
    const locks = await open({ keyPrefix: uniquePrefix('redlock') });
    const lock = locks.lock('payout:5');
    await lock.withLock(async () => {
      await expect(lock.acquire()).rejects.toBeInstanceOf(LockReentryError);
    });
    {
      await using lease = await lock.acquire();
      expect(lease.holdCount).toBe(1);
    }
    await goneEverywhere(lock.key);
  });

  it('rejects bad input with InvalidArgumentError before any command', async () => {
    const sent: string[][] = [];
    const raw = await masters.connect();
    const watched = raw.map((client) =>
      interceptCommands<LockConnection>(client, (args) => {
        sent.push([...args]);
      }),
    );
    const first = watched[0] as LockConnection;
    expect(() => new RedlockClient(watched.slice(0, 2))).toThrow(InvalidArgumentError);
    expect(() => new RedlockClient([first, first, ...watched.slice(1)])).toThrow(/distinct clients/);
    expect(() => new RedlockClient([...watched.slice(1), {} as LockConnection])).toThrow(
      InvalidArgumentError,
    );
    expect(() => new RedlockClient('redis://x' as never)).toThrow(InvalidArgumentError);
    expect(() => new RedlockClient(watched, { nodeTimeoutMs: 0 })).toThrow(InvalidArgumentError);
    expect(() => new RedlockClient(watched, { watchdogTimeoutMs: 1_000, nodeTimeoutMs: 200 })).toThrow(
      /at least 10 times/,
    );
    expect(() => new RedlockClient(watched, { quorum: 1 } as never)).toThrow(/Unknown option/);
    const locks = new RedlockClient(watched, OPTIONS);
    clients.push(locks);
    expect(() => locks.lock('')).toThrow(InvalidArgumentError);
    const lock = locks.lock('payout:6');
    await expect(lock.acquire({ leaseMs: 500 })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(lock.acquire({ waitMs: -1 })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(lock.tryAcquire({ signal: 'x' } as never)).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(lock.withLock('x' as never)).rejects.toBeInstanceOf(InvalidArgumentError);
    expect(sent).toEqual([]);
    // The same clients work once the input is right.
    await (await lock.acquire({ leaseMs: 5_000 })).release();
    expect(sent.length).toBeGreaterThan(0);
  });
});

describe('Redlock over masters reached by different client libraries', () => {
  let masters: Masters;
  const made: LockConnection[] = [];
  const clients: RedlockClient[] = [];

  beforeAll(async () => {
    masters = await startMasters(3);
  });
  afterAll(async () => {
    await Promise.all(clients.map((client) => client.close()));
    for (const client of made) destroyClient(client);
    await masters.stop();
  });

  /** One client per master, each of another library, starting at `first` in the list. */
  const mixed = async (first: number): Promise<RedlockClient> => {
    const libraries = ['node-redis', 'ioredis', 'glide'] as const;
    const connections = await Promise.all(
      masters.servers.map((server, index) =>
        connectClient({ url: server.url }, libraries[(first + index) % libraries.length]),
      ),
    );
    made.push(...connections);
    const client = new RedlockClient(connections, { ...OPTIONS, ...EVERY_MASTER, keyPrefix: 'mixed:' });
    clients.push(client);
    return client;
  };

  it('holds a lock on every master, and hands it to a waiter of another mix on release', async () => {
    const [a, b] = [await mixed(0), await mixed(1)];
    const lease = await a.lock('payout:mixed').acquire();
    await heldEverywhere(masters, lease.key);
    expect(await b.lock('payout:mixed').tryAcquire()).toBeNull();
    const waiting = b.lock('payout:mixed').acquire({ waitMs: 5_000 });
    await sleep(100);
    await lease.release();
    const next = await waiting;
    expect(next.key).toBe(lease.key);
    expect(await a.lock('payout:mixed').tryAcquire()).toBeNull();
    await next.release();
  });
});
