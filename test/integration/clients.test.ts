/**
 * The clients a LockClient accepts, and the adapters that drive them. Refused at construction,
 * with a message that says what was expected and what arrived: values that are no client,
 * Cluster and Sentinel clients of either library, clients not connected or closed. For each of
 * node-redis and ioredis, what the engine relies on: replies in one form; every command written
 * at most once (ioredis by itself sends a command again after a reconnect); a command given up
 * on before it was written never written; a subscriber that dispatches by channel and, after a
 * reconnect, says so only once it has subscribed again; a subscriber connection that can let the
 * process exit; and the one check of the server's version, refusing a server older than 6.0.6.
 *
 * This file covers both libraries itself, so the ioredis run of the integration suite
 * (LATCHKEY_TEST_CLIENT=ioredis) skips it.
 */
import { createServer, connect as netConnect, type AddressInfo, type Socket } from 'node:net';
import { Cluster, Redis as IoRedis, type RedisOptions } from 'ioredis';
import { createClient, createCluster, createSentinel } from 'redis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { InvalidArgumentError, LockClient, LockError } from '../../src/index.js';
import { adapt, isConnection } from '../../src/redis/adapt.js';
import type { RedisConnection } from '../../src/redis/connection.js';
import { isServerReply } from '../../src/redis/replies.js';
import { isTransient, ScriptRunner } from '../../src/scripts/runner.js';
import {
  commandsOf,
  connectClient,
  destroyClient,
  TEST_CLIENT,
  type LockConnection,
  type TestClientLibrary,
} from '../support/clients.js';
import { startFaultProxy } from '../support/fault-proxy.js';
import { uniquePrefix } from '../support/keys.js';
import { commandsFrom } from '../support/monitor.js';
import { startRedis, type RedisInstance } from '../support/redis-server.js';
import { testResources, type Redis } from '../support/resources.js';
import { settle, sleep, waitUntil, within } from '../support/wait.js';

const LIBRARIES: readonly TestClientLibrary[] = ['node-redis', 'ioredis'];
const UNREF_FIXTURE = new URL('../support/fixtures/unref-subscriber.ts', import.meta.url).pathname;

function connectionOf(client: unknown): RedisConnection {
  const adapted = adapt(client);
  if (!isConnection(adapted)) throw new Error(`the client was refused: ${adapted.problem}`);
  return adapted;
}

/** What `new LockClient(client)` throws; fails the test when it throws nothing. */
function refusal(client: unknown): InvalidArgumentError {
  try {
    new LockClient(client as never);
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidArgumentError);
    return error as InvalidArgumentError;
  }
  throw new Error('new LockClient() accepted the client');
}

/**
 * A TCP proxy to `target` that makes the server look like Redis `version`: the `redis_version`
 * line of every INFO reply is rewritten, and the reply's length with it. An INFO reply is far
 * smaller than a socket read, so it arrives in one chunk.
 */
async function startVersionProxy(
  target: { host: string; port: number },
  version: string,
): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const rewrite = (chunk: Buffer): Buffer => {
    const text = chunk.toString('latin1');
    const out = text.replace(
      /([$=])(\d+)\r\n((?:txt:)?# Server\r\nredis_version:)([^\r]*)/,
      (_match, kind: string, length: string, head: string, real: string) =>
        `${kind}${Number(length) + version.length - real.length}\r\n${head}${version}`,
    );
    return out === text ? chunk : Buffer.from(out, 'latin1');
  };
  const server = createServer((client) => {
    const upstream = netConnect(target);
    sockets.add(client);
    sockets.add(upstream);
    const end = (): void => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.pipe(upstream);
    upstream.on('data', (chunk: Buffer) => client.write(rewrite(chunk)));
    for (const socket of [client, upstream]) {
      socket.on('error', end);
      socket.on('close', end);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `redis://127.0.0.1:${port}`,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe.skipIf(TEST_CLIENT === 'ioredis')('clients and their adapters', () => {
  let server: RedisInstance;
  let admin: Redis;
  const perFile = testResources(() => server.url);
  const res = testResources(() => server.url);
  /** Clients a test made by hand; closed after it. */
  const made: { close(): unknown }[] = [];

  beforeAll(async () => {
    // Connections are killed and DEBUG SLEEP is used: a server of this file's own.
    server = await startRedis({ args: ['--enable-debug-command', 'yes'] });
    admin = await perFile.connect();
  });

  afterEach(async () => {
    for (const client of made.splice(0)) {
      try {
        await client.close();
      } catch {
        // Never connected.
      }
    }
    await res.closeAll();
  });

  afterAll(async () => {
    await perFile.closeAll();
    await server.stop();
  });

  describe('which clients a LockClient accepts', () => {
    const target = (): { host: string; port: number } => ({ host: server.host, port: server.port });
    const ioredisClosing = (client: IoRedis): { close(): unknown } => ({ close: () => client.disconnect() });

    const refused: readonly (readonly [string, () => Promise<unknown>, readonly string[]])[] = [
      [
        'a value that is no client',
        () => Promise.resolve({ get: () => null }),
        [
          'Expected `redis` to be a connected node-redis client',
          'or ioredis client',
          'got a value of type object',
        ],
      ],
      [
        'a node-redis client not connected yet',
        () => Promise.resolve(createClient({ url: server.url })),
        ['node-redis client is not connected', '`await client.connect()`'],
      ],
      [
        'a node-redis client closed',
        async () => {
          const client = await connectClient({ url: server.url }, 'node-redis');
          destroyClient(client);
          return client;
        },
        ['node-redis client is not connected', '`await client.connect()`'],
      ],
      [
        'a node-redis Cluster client not connected',
        () => Promise.resolve(createCluster({ rootNodes: [{ url: server.url }] })),
        ['the node-redis client is not connected', '`await client.connect()`'],
      ],
      [
        'a node-redis Sentinel client not connected yet',
        () => Promise.resolve(createSentinel({ name: 'orders', sentinelRootNodes: [target()] })),
        ['node-redis client is not connected', '`await client.connect()`'],
      ],
      [
        'an ioredis client with lazyConnect, not connected yet',
        () => {
          const client = new IoRedis(server.url, { lazyConnect: true });
          made.push(ioredisClosing(client));
          return Promise.resolve(client);
        },
        ['ioredis client is not connected (status "wait"', '`await redis.connect()`'],
      ],
      [
        'an ioredis client closed',
        async () => {
          const client = (await connectClient({ url: server.url }, 'ioredis')) as IoRedis;
          client.disconnect();
          await waitUntil('the ioredis client has ended', () => client.status === 'end');
          return client;
        },
        ['ioredis client is closed (status "end")'],
      ],
      [
        'an ioredis Cluster client',
        () => {
          const client = new Cluster([target()], { lazyConnect: true });
          made.push({ close: () => client.disconnect() });
          return Promise.resolve(client);
        },
        ['ioredis Cluster clients are not supported', 'node-redis createCluster()'],
      ],
      [
        'an ioredis Sentinel client with lazyConnect, not connected yet',
        () => {
          const client = new IoRedis({ sentinels: [target()], name: 'orders', lazyConnect: true });
          made.push(ioredisClosing(client));
          return Promise.resolve(client);
        },
        ['ioredis client is not connected (status "wait"', '`await redis.connect()`'],
      ],
      [
        'an ioredis client in subscriber mode (RESP2)',
        async () => {
          // Over RESP3 a subscribed connection still sends other commands; over RESP2 it cannot.
          const client = new IoRedis(server.url, { protocol: 2 });
          made.push(ioredisClosing(client));
          await client.subscribe(`${uniquePrefix('clients')}channel`);
          return client;
        },
        ['ioredis client is in subscriber or monitor mode'],
      ],
    ];

    it.each(refused)(
      'refuses %s, saying what was expected and what arrived',
      async (_label, make, mentions) => {
        const message = refusal(await make()).message;
        for (const mention of mentions) expect(message).toContain(mention);
      },
    );

    it('accepts an ioredis client that is still connecting: its commands wait for the connection', async () => {
      const client = new IoRedis(server.url);
      client.on('error', () => {});
      made.push(ioredisClosing(client));
      expect(client.status).toBe('connecting');
      const locks = res.track(new LockClient(client, { keyPrefix: uniquePrefix('clients') }));
      const lease = await locks.lock('invoice:1').acquire();
      expect(lease.holdCount).toBe(1);
      await lease.release();
    });
  });

  describe('ioredis options that change keys or replies', () => {
    const cases: readonly (readonly [string, RedisOptions])[] = [
      ['keyPrefix (not applied to latchkey keys)', { keyPrefix: 'tenant-a:' }],
      ['stringNumbers', { stringNumbers: true }],
      ['RESP2', { protocol: 2 }],
      ['RESP3', { protocol: 3 }],
    ];

    it.each(cases)('%s: every kind of lock works, under the keys latchkey names', async (_label, options) => {
      const client = new IoRedis(server.url, { ...options, lazyConnect: true });
      client.on('error', () => {});
      made.push({ close: () => client.disconnect() });
      await client.connect();
      const prefix = uniquePrefix('clients-options');
      const locks = res.track(new LockClient(client, { keyPrefix: prefix }));
      const other = res.track(new LockClient(await res.connect(), { keyPrefix: prefix }));

      // Handed over from a node-redis holder to this client's waiter, through its subscriber.
      const held = await other.lock('invoice:5').acquire();
      const handedOver = locks.lock('invoice:5').acquire({ waitMs: 5_000 });
      await sleep(50);
      await held.release();
      const lease = await handedOver;
      expect(await admin.exists(`${prefix}invoice:5`)).toBe(1);
      expect(await locks.lock('invoice:5').isLocked()).toBe(true);
      expect(await locks.lock('invoice:5').remainingTtlMs()).toBeGreaterThan(0);
      await lease.release();

      const first = await locks.fencedLock('ledger:5').acquire();
      await first.release();
      const second = await locks.fencedLock('ledger:5').acquire();
      expect(second.token).toBe(first.token + 1n);
      expect(await locks.fencedLock('ledger:5').currentToken()).toBe(second.token);
      await second.release();

      await locks.simpleLock('report:5').withLock(async () => {
        expect(await admin.exists(`${prefix}report:5`)).toBe(1);
      });
      expect(await admin.keys('tenant-a:*')).toEqual([]);
      expect(await admin.exists([`${prefix}invoice:5`, `${prefix}report:5`])).toBe(0);
    });
  });

  describe.each(LIBRARIES)('the %s adapter', (library) => {
    async function connected(url = server.url, name?: string): Promise<LockConnection> {
      const client = await connectClient({ url, ...(name === undefined ? {} : { name }) }, library);
      made.push({ close: () => destroyClient(client) });
      return client;
    }

    it('hands the engine replies in one form: numbers, null, strings, arrays of the same', async () => {
      const runner = new ScriptRunner(connectionOf(await connected()), 2_000);
      const missing = `${uniquePrefix('clients')}missing`;
      expect(await runner.send(['EVAL', 'return 42', '0'])).toBe(42);
      expect(await runner.send(['EVAL', 'return nil', '0'])).toBeNull();
      expect(await runner.send(['EVAL', "return 'text'", '0'])).toBe('text');
      expect(await runner.send(['EVAL', "return {1, 'two', {3, false}, 'é'}", '0'])).toEqual([
        1,
        'two',
        [3, null],
        'é',
      ]);
      expect(await runner.send(['PTTL', missing])).toBe(-2);
      expect(await runner.send(['HGET', missing, 'field'])).toBeNull();
      const info = await runner.send(['INFO', 'server']);
      expect(typeof info).toBe('string');
      expect(info).toMatch(/^redis_version:\d+\.\d+\.\d+/m);

      const refused = await settle(
        runner.send(['EVAL', "return redis.error_reply('WRONGTYPE not a hash')", '0']),
      );
      expect(refused.error).toBeInstanceOf(Error);
      expect((refused.error as Error).message).toBe('WRONGTYPE not a hash');
      expect(isServerReply(refused.error as Error)).toBe(true);
      expect(isTransient(refused.error)).toBe(false);
      // Redis 7 passes a replica's refusal of a script's write on as it is; Redis 6 wraps it in
      // the script's error (this server is 7, so the script returns Redis 6's text itself). Both
      // are worth sending again; any other error a script raises is not.
      for (const [text, transient] of [
        ["READONLY You can't write against a read only replica.", true],
        [
          "ERR Error running script (call to f_0123456789abcdef0123456789abcdef01234567): @user_script:12: @user_script: 12: -READONLY You can't write against a read only replica.",
          true,
        ],
        [
          'ERR Error running script (call to f_0123456789abcdef0123456789abcdef01234567): @user_script:12: WRONGTYPE Operation against a key holding the wrong kind of value',
          false,
        ],
      ] as const) {
        const failed = await settle(runner.send(['EVAL', 'return redis.error_reply(ARGV[1])', '0', text]));
        expect((failed.error as Error).message).toBe(text);
        expect(isTransient(failed.error)).toBe(transient);
      }
      const unknown = await settle(runner.send(['EVALSHA', '0'.repeat(40), '0']));
      expect((unknown.error as Error).message).toMatch(/^NOSCRIPT/);
    });

    it('writes a command at most once: one whose connection dropped before its reply is not sent again', async () => {
      // Through a proxy that delays each chunk: the command reaches the server and runs, and
      // its connection is torn down while the reply is still held in the proxy.
      const proxy = await startFaultProxy({ targetHost: server.host, targetPort: server.port });
      try {
        const client = await connected(proxy.url);
        const connection = connectionOf(client);
        const key = `${uniquePrefix('clients')}counter`;
        proxy.setLatency(200);
        const counting = settle(connection.send(['EVAL', "return redis.call('INCR', KEYS[1])", '1', key]));
        await waitUntil('the command has run', async () => (await admin.get(key)) === '1');
        proxy.setLatency(0);
        expect(proxy.resetAll()).toBe(1);
        const counted = await within(counting, 5_000, 'the command whose reply was lost');
        expect(counted.error).toBeInstanceOf(Error);
        expect(isTransient(counted.error)).toBe(true);
        // The client is back on a new connection; nothing it sent before runs again.
        await waitUntil('the client is connected again', async () => {
          const ping = await settle(commandsOf(client).sendCommand(['PING']));
          return ping.value === 'PONG';
        });
        await sleep(100);
        expect(await admin.get(key)).toBe('1');
      } finally {
        await proxy.close();
      }
    });

    it('never writes a command given up on before it was written, and writes one not given up on', async () => {
      const own = await startRedis();
      try {
        const client = await connected(own.url);
        const connection = connectionOf(client);
        expect(connection.sendsAtOnce).toBe(true);
        const prefix = uniquePrefix('clients');
        await own.kill();
        await waitUntil('the client saw its connection go', () => !connection.sendsAtOnce);

        const controller = new AbortController();
        const givenUp = settle(connection.send(['SET', `${prefix}given-up`, 'late'], controller.signal));
        const kept = settle(connection.send(['SET', `${prefix}kept`, 'sent'], new AbortController().signal));
        await sleep(20);
        controller.abort();
        expect((await givenUp).error).toBeInstanceOf(Error);

        await own.restart();
        expect((await within(kept, 10_000, 'the command sent while disconnected')).value).toBe('OK');
        await sleep(100);
        const direct = await res.connect({ url: own.url });
        expect(await direct.get(`${prefix}kept`)).toBe('sent');
        expect(await direct.exists(`${prefix}given-up`)).toBe(0);
      } finally {
        await own.stop();
      }
    });

    it('dispatches messages by channel, and after a reconnect says so once it has subscribed again', async () => {
      const name = `lk-clients-sub-${library}`;
      const connection = connectionOf(await connected(server.url, name));
      let reconnects = 0;
      const subscriber = await connection.openSubscriber({
        onError: () => {},
        onReconnect: () => {
          reconnects += 1;
        },
      });
      made.push({ close: () => subscriber.destroy() });
      const prefix = uniquePrefix('clients');
      const [orders, invoices] = [`${prefix}orders`, `${prefix}invoices`];
      const heard: Record<string, string[]> = { [orders]: [], [invoices]: [] };
      const onOrders = (message: string, channel: string): void =>
        void heard[channel]?.push(`orders:${message}`);
      const onInvoices = (message: string, channel: string): void =>
        void heard[channel]?.push(`invoices:${message}`);
      await subscriber.subscribe(orders, onOrders);
      await subscriber.subscribe(invoices, onInvoices);
      await admin.publish(orders, '1');
      await admin.publish(invoices, '2');
      await waitUntil(
        'both messages are heard',
        () => heard[invoices]?.length === 1 && heard[orders]?.length === 1,
      );
      expect(heard).toEqual({ [orders]: ['orders:1'], [invoices]: ['invoices:2'] });

      await subscriber.unsubscribe(invoices, onInvoices);
      expect(await admin.publish(invoices, '3')).toBe(0);

      const clients = (await admin.sendCommand<string>(['CLIENT', 'LIST', 'TYPE', 'PUBSUB']))
        .split('\n')
        .filter((line) => line.includes(`name=${name} `));
      expect(clients).toHaveLength(1);
      const id = /(?:^|\s)id=(\d+)/.exec(clients[0] ?? '')?.[1] ?? '';
      await admin.sendCommand(['CLIENT', 'KILL', 'ID', id]);
      await waitUntil('the subscriber says it reconnected', () => reconnects === 1, 10_000);
      // Said once subscribed again: a message published now is heard.
      expect(await admin.publish(orders, '4')).toBe(1);
      await waitUntil('the message after the reconnect is heard', () => heard[orders]?.length === 2);
      expect(heard).toEqual({ [orders]: ['orders:1', 'orders:4'], [invoices]: ['invoices:2'] });
      expect(reconnects).toBe(1);
    });

    it('keeps every channel when its connection drops again before the server confirmed them', async () => {
      // Through a proxy that can delay each chunk: the connection is reset, and the next one is
      // reset too once the server has its SUBSCRIBE but before the confirmation gets back. An
      // ioredis client that does not send unanswered commands again is the user's choice.
      const proxy = await startFaultProxy({ targetHost: server.host, targetPort: server.port });
      try {
        let client: LockConnection;
        if (library === 'ioredis') {
          const ioredis = new IoRedis(proxy.url, { lazyConnect: true, autoResendUnfulfilledCommands: false });
          ioredis.on('error', () => {});
          made.push({ close: () => ioredis.disconnect() });
          await ioredis.connect();
          client = ioredis;
        } else {
          client = await connected(proxy.url);
        }
        let reconnects = 0;
        const subscriber = await connectionOf(client).openSubscriber({
          onError: () => {},
          onReconnect: () => {
            reconnects += 1;
          },
        });
        made.push({ close: () => subscriber.destroy() });
        const orders = `${uniquePrefix('clients')}orders`;
        const heard: string[] = [];
        await subscriber.subscribe(orders, (message) => void heard.push(message));
        const numsub = async (): Promise<number> =>
          Number((await admin.sendCommand<unknown[]>(['PUBSUB', 'NUMSUB', orders]))[1]);
        expect(await numsub()).toBe(1);

        proxy.setLatency(500);
        expect(proxy.resetAll()).toBeGreaterThanOrEqual(1);
        await waitUntil(
          'the server has the SUBSCRIBE of the next connection',
          async () => (await numsub()) === 1,
          15_000,
        );
        // Its confirmation is held in the proxy for up to 500 ms: gone with this reset.
        proxy.resetAll();
        proxy.setLatency(0);
        await waitUntil('the subscriber says it reconnected', () => reconnects >= 1, 15_000);
        await waitUntil('the channel is subscribed again', async () => (await numsub()) === 1, 10_000);
        expect(await admin.publish(orders, 'after')).toBe(1);
        await waitUntil('the message after the reconnects is heard', () => heard.includes('after'));
      } finally {
        await proxy.close();
      }
    });

    it('lets the process exit while its subscriber connection is open once unref() is called, and not after ref()', async () => {
      const env = { LIBRARY: library, REDIS_URL: server.url, CHANNEL: `${uniquePrefix('clients')}unref` };
      const unrefd = res.worker(UNREF_FIXTURE, env);
      await unrefd.next((msg) => msg['type'] === 'ready', 10_000);
      expect(
        await within(unrefd.exited, 5_000, 'the exit of the process with an unref()d subscriber'),
      ).toEqual({
        code: 0,
        signal: null,
      });

      const refd = res.worker(UNREF_FIXTURE, { ...env, REF: '1' });
      await refd.next((msg) => msg['type'] === 'ready', 10_000);
      const exited = await Promise.race([refd.exited.then(() => true), sleep(1_500).then(() => false)]);
      expect(exited).toBe(false);
    });

    describe('on a server older than 6.0.6', () => {
      it('rejects every acquire with UNSUPPORTED_SERVER, asking the server once and sending no script', async () => {
        const proxy = await startVersionProxy({ host: server.host, port: server.port }, '6.0.5');
        try {
          const monitor = await res.monitor();
          const prefix = uniquePrefix('clients-old');
          const locks = res.track(new LockClient(await connected(proxy.url), { keyPrefix: prefix }));
          const lock = locks.lock('invoice:2');
          const outcomes: { error?: unknown }[] = await Promise.all([
            settle(lock.acquire()),
            settle(lock.acquire({ waitMs: 1_000 })),
            settle(locks.simpleLock('invoice:3').tryAcquire()),
          ]);
          outcomes.push(
            await settle(locks.fencedLock('invoice:4').acquire()),
            await settle(lock.forceUnlock()),
          );
          for (const outcome of outcomes) {
            expect(outcome.error).toBeInstanceOf(LockError);
            expect((outcome.error as LockError).code).toBe('UNSUPPORTED_SERVER');
            expect((outcome.error as LockError).message).toBe(
              'Redis 6.0.5 is too old for latchkey, which needs Redis 6.0.6 or later (its scripts use LPOS)',
            );
          }
          const marker = `${prefix}end`;
          await admin.sendCommand(['ECHO', marker]);
          await monitor.waitFor((lines) => commandsFrom(lines).some((command) => command[1] === marker));
          const commands = commandsFrom(monitor.lines, { excludeLua: true });
          expect(
            commands.filter((command) => command.join(' ').toUpperCase() === 'INFO SERVER'),
          ).toHaveLength(1);
          expect(commands.filter((command) => /^EVAL/i.test(command[0] ?? ''))).toEqual([]);
        } finally {
          await proxy.close();
        }
      });
    });
  });
});
