/**
 * A lock call sent in the instant its connection is reset must get its own reply or a failure
 * that latchkey retries, never the reply of another command.
 *
 * node-redis writes queued commands from a `setImmediate`. When the connection is reset after a
 * command was queued on a ready client but before that write ran, node-redis 5 writes the
 * command to the dead socket and keeps it among the commands awaiting a reply; the new
 * connection's first replies (those of its own `CLIENT SETINFO` handshake) then go to it, and
 * every reply after is one command late. The test provokes exactly that window for real: a
 * fault proxy between the client and Redis resets the connection (RST) right after a lock
 * script call was handed to node-redis, and the event loop next sees the reset before that
 * write. Redis here may be 7.0, which refuses `CLIENT SETINFO` (the refusal is what a lock call
 * received); on Redis 7.2 and later the same shift hands it an `OK`.
 */
import { afterEach, beforeAll, afterAll, describe, expect, it } from 'vitest';
import { LockClient } from '../../src/index.js';
import { NodeRedisConnection } from '../../src/redis/node-redis.js';
import { unwrittenCommandsOf } from '../../src/redis/node-redis-unwritten.js';
import { connectNodeRedis, destroyClient, type NodeRedis } from '../support/clients.js';
import { startFaultProxy, type FaultProxy } from '../support/fault-proxy.js';
import { uniquePrefix } from '../support/keys.js';
import { startRedis, type RedisInstance } from '../support/redis-server.js';
import { settle, sleep, within } from '../support/wait.js';

/** Enough for the RST to be waiting at the client's socket when its event loop runs on. */
const BLOCK_MS = 20;

describe('a lock call sent in the instant its connection is reset', () => {
  let server: RedisInstance;
  let admin: NodeRedis;
  const cleanups: (() => Promise<void> | void)[] = [];

  beforeAll(async () => {
    server = await startRedis();
    admin = await connectNodeRedis({ url: server.url });
  }, 30_000);

  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  afterAll(async () => {
    destroyClient(admin);
    await server?.stop();
  });

  /** A node-redis client through `proxy` whose next lock script call is followed by a reset. */
  async function clientWithTrap(
    proxy: FaultProxy,
  ): Promise<{ redis: NodeRedis; arm(): void; sprung(): boolean }> {
    const redis = await connectNodeRedis({ url: proxy.url });
    cleanups.push(() => destroyClient(redis));
    const send = redis.sendCommand.bind(redis);
    let armed = false;
    let sprung = false;
    redis.sendCommand = ((...args: Parameters<typeof send>) => {
      const reply = send(...args);
      const [command] = args[0];
      if (armed && (command === 'EVALSHA' || command === 'EVAL')) {
        armed = false;
        sprung = true;
        // node-redis has queued the call and scheduled its write; the connection goes now, and
        // the reset is at the client's socket before its event loop reaches that write.
        proxy.resetAll();
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, BLOCK_MS);
      }
      return reply;
    }) as typeof send;
    return {
      redis,
      arm: () => {
        armed = true;
      },
      sprung: () => sprung,
    };
  }

  it('gets its own outcome, and the connection answers each later command with its own reply', async () => {
    const proxy = await startFaultProxy({ targetHost: '127.0.0.1', targetPort: server.port });
    cleanups.push(() => proxy.close());
    const trap = await clientWithTrap(proxy);
    const locks = new LockClient(trap.redis, { keyPrefix: uniquePrefix('reset-window') });
    locks.on('error', () => undefined);
    cleanups.push(() => locks.close());
    // A first call: the server checks are behind us, the client is ready and idle.
    await (await locks.lock('ledger').acquire()).release();

    trap.arm();
    // Sent from a timer's callback, as most calls are: the event loop polls sockets next, and
    // only then runs immediates.
    await sleep(1);
    const acquired = await settle(within(locks.lock('invoice').acquire(), 10_000, 'the acquire'));
    expect(trap.sprung()).toBe(true);
    expect(proxy.acceptedCount).toBeGreaterThan(1);
    // Were the handshake's reply taken for the script's, the acquire would reject with
    // "ERR unknown subcommand 'SETINFO'" (Redis 7.0) or misread "OK" (Redis 7.2 and later).
    expect(acquired.error).toBeUndefined();
    const lease = acquired.value;
    expect(lease).toBeDefined();
    expect(await admin.hLen(lease?.key ?? '')).toBe(1);

    // Every reply on the client's connection is its own command's.
    for (const word of ['orders', 'invoices', 'coupons']) {
      expect(await within(trap.redis.sendCommand(['ECHO', word]), 5_000, `ECHO ${word}`)).toBe(word);
    }
    await within(lease?.release() ?? Promise.resolve(), 5_000, 'the release');
    expect(await admin.exists(lease?.key ?? '')).toBe(0);
  }, 30_000);

  it('counts a command unwritten from the moment node-redis queues it until it takes it out to write it', async () => {
    // latchkey learns which commands are not written yet from node-redis itself: it adds the
    // command's abort listener when it queues it and removes it when it writes it. A version
    // of node-redis that kept the listener would leave every command counted here for ever.
    const redis = await connectNodeRedis({ url: server.url });
    cleanups.push(() => destroyClient(redis));
    const connection = new NodeRedisConnection(redis);
    const unwritten = unwrittenCommandsOf(redis);
    const replies = Array.from({ length: 50 }, (_, i) => connection.send(['ECHO', `order:${i}`]));
    expect(unwritten?.size).toBe(50);
    expect(await Promise.all(replies)).toEqual(Array.from({ length: 50 }, (_, i) => `order:${i}`));
    expect(unwritten?.size).toBe(0);
  });

  it('forgets a command node-redis times out before writing it, and withdraws nothing of it later', async () => {
    // node-redis's own command timeout (a client's command options) rejects a command still
    // queued without taking its abort listener off; taking it out of node-redis's queue a second
    // time, on a later reset, would miscount that queue.
    const redis = await connectNodeRedis({ url: server.url });
    cleanups.push(() => destroyClient(redis));
    // As `createClient({ commandOptions: { timeout: 1 } })` sets it, once connected (a 1 ms
    // timeout would fail the handshake's own commands on a busy machine).
    (redis as unknown as { _self: { _commandOptions?: { timeout: number } } })._self._commandOptions = {
      timeout: 1,
    };
    const connection = new NodeRedisConnection(redis);
    const unwritten = unwrittenCommandsOf(redis);
    // Sent from an immediate and held there past the timeout: the event loop runs the timeout's
    // timer before the next immediates, node-redis's write among them.
    const { reply } = await new Promise<{ reply: Promise<unknown> }>((resolve) => {
      setImmediate(() => {
        const sent = connection.send(['ECHO', 'late']);
        const until = performance.now() + 10;
        while (performance.now() < until) {
          // Held past the 1 ms timeout.
        }
        resolve({ reply: sent });
      });
    });
    await expect(reply).rejects.toThrow();
    expect(unwritten?.size).toBe(0);
    (redis as unknown as { _self: { _commandOptions?: { timeout: number } } })._self._commandOptions =
      undefined;
    expect(await within(redis.sendCommand(['ECHO', 'next']), 5_000, 'ECHO next')).toBe('next');
  });
});
