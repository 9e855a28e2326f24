/**
 * The fault proxy the chaos tests put between lock clients and Redis: it relays bytes
 * faithfully (order, large payloads under backpressure), delays them by the latency set,
 * holds them during a blackhole without closing anything, and resets connections with RST.
 */
import { randomBytes } from 'node:crypto';
import { connect as netConnect, type Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startFaultProxy, type FaultProxy } from '../support/fault-proxy.js';
import { uniquePrefix } from '../support/keys.js';
import { sharedRedis } from '../support/redis-server.js';
import { testResources, type Redis } from '../support/resources.js';
import { settle, sleep, waitUntil } from '../support/wait.js';

/** A raw socket to the proxy, connected, with its error (if any) recorded. */
async function rawSocket(proxy: FaultProxy): Promise<{ socket: Socket; errors: NodeJS.ErrnoException[] }> {
  const errors: NodeJS.ErrnoException[] = [];
  const socket = netConnect({ host: proxy.host, port: proxy.port });
  socket.on('error', (error: NodeJS.ErrnoException) => errors.push(error));
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  return { socket, errors };
}

describe('the fault proxy', () => {
  let url: string;
  let direct: Redis;
  let proxy: FaultProxy;
  const perFile = testResources(() => url);
  const res = testResources(() => proxy.url);
  const prefix = uniquePrefix('fault-proxy');

  beforeAll(async () => {
    ({ url } = await sharedRedis());
    direct = await perFile.connect();
  });

  afterEach(async () => {
    await res.closeAll();
    await proxy.close();
  });

  afterAll(() => perFile.closeAll());

  async function start(): Promise<FaultProxy> {
    const target = new URL(url);
    proxy = await startFaultProxy({ targetHost: target.hostname, targetPort: Number(target.port) });
    return proxy;
  }

  it('relays commands and counts its open connections', async () => {
    await start();
    const client = await res.connect();
    expect(await client.ping()).toBe('PONG');
    await client.set(`${prefix}relay`, 'through the proxy');
    expect(await direct.get(`${prefix}relay`)).toBe('through the proxy');
    expect(proxy.connectionCount).toBe(1);

    const second = await rawSocket(proxy);
    await waitUntil('the second connection is counted', () => proxy.connectionCount === 2, 2_000);
    second.socket.destroy();
    await waitUntil('the closed connection is no longer counted', () => proxy.connectionCount === 1, 2_000);
    expect(proxy.acceptedCount).toBe(2);
  });

  it('delays each direction by the latency set and keeps replies in order when it changes', async () => {
    await start();
    const client = await res.connect();
    await client.ping();

    proxy.setLatency(100);
    const startedAt = performance.now();
    await client.ping();
    // One way there, one way back.
    expect(performance.now() - startedAt).toBeGreaterThanOrEqual(195);

    const key = `${prefix}order`;
    const replies: Promise<number>[] = [];
    for (let i = 0; i < 50; i += 1) replies.push(client.incr(key));
    // Lowered while the first replies are still held: later bytes must not overtake them.
    await sleep(20);
    proxy.setLatency(0);
    for (let i = 0; i < 50; i += 1) replies.push(client.incr(key));
    expect(await Promise.all(replies)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
  });

  it('carries a payload much larger than its buffers intact', async () => {
    await start();
    proxy.setLatency(10);
    const client = await res.connect();
    const value = randomBytes(6 << 20).toString('base64');
    await client.set(`${prefix}large`, value);
    expect(await client.get(`${prefix}large`)).toBe(value);
    expect(await direct.strLen(`${prefix}large`)).toBe(value.length);
  });

  it('holds traffic during a blackhole, keeps the connection open, and delivers it afterwards', async () => {
    await start();
    const client = await res.connect();
    await client.ping();
    const key = `${prefix}held`;

    proxy.blackhole(true);
    const pending = settle(client.set(key, 'late'));
    await sleep(500);
    // Nothing reached the server, nothing came back, and nobody closed anything.
    expect(await direct.exists(key)).toBe(0);
    expect(client.isReady).toBe(true);
    expect(proxy.connectionCount).toBe(1);

    // A connection opened during the blackhole is held too.
    const late = await rawSocket(proxy);
    let lateReply = '';
    late.socket.on('data', (chunk: Buffer) => (lateReply += chunk.toString()));
    late.socket.write('PING\r\n');
    await sleep(200);
    expect(lateReply).toBe('');

    proxy.blackhole(false);
    expect((await pending).value).toBe('OK');
    expect(await direct.get(key)).toBe('late');
    await waitUntil('the held PING is answered', () => lateReply === '+PONG\r\n', 2_000);
    expect(late.errors).toEqual([]);
    expect(proxy.acceptedCount).toBe(2);
    late.socket.destroy();
  });

  it('resets every connection with RST, and accepts new ones afterwards', async () => {
    await start();
    const raw = await rawSocket(proxy);
    raw.socket.write('PING\r\n');
    await new Promise((resolve) => raw.socket.once('data', resolve));
    const client = await res.connect({ name: 'fault-proxy-reset' });
    const clientErrors: Error[] = [];
    client.on('error', (error: Error) => clientErrors.push(error));
    await client.ping();
    const listed = async (): Promise<boolean> =>
      (await direct.sendCommand<string>(['CLIENT', 'LIST'])).includes('name=fault-proxy-reset');
    expect(await listed()).toBe(true);

    expect(proxy.resetAll()).toBe(2);
    await waitUntil('the raw socket sees the reset', () => raw.errors.length > 0, 2_000);
    expect(raw.errors[0]?.code).toBe('ECONNRESET');
    await waitUntil('node-redis sees the reset', () => clientErrors.length > 0, 2_000);

    // node-redis reconnects through the proxy on its own.
    expect(await client.ping()).toBe('PONG');
    expect(proxy.acceptedCount).toBe(3);
    expect(proxy.connectionCount).toBe(1);
    expect(await listed()).toBe(true);
  });

  it('closes every connection and stops accepting on close()', async () => {
    await start();
    const raw = await rawSocket(proxy);
    const closed = new Promise((resolve) => raw.socket.once('close', resolve));
    await proxy.close();
    await closed;
    expect(proxy.connectionCount).toBe(0);
    const refused = await settle(rawSocket(proxy));
    expect((refused.error as NodeJS.ErrnoException | undefined)?.code).toBe('ECONNREFUSED');
    await proxy.close();
  });
});
