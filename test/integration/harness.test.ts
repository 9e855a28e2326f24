import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from 'redis';
import { spawnWorker } from '../support/child.js';
import { uniquePrefix } from '../support/keys.js';
import { clientAddr, commandsFrom, monitorCommands } from '../support/monitor.js';
import { pingRedis, sharedRedis, startRedis, type RedisInstance } from '../support/redis-server.js';

const ECHO_WORKER = new URL('../support/fixtures/echo-worker.ts', import.meta.url).pathname;

describe('test harness', () => {
  describe('a dedicated server', () => {
    let redis: RedisInstance;

    beforeAll(async () => {
      redis = await startRedis();
    });

    afterAll(async () => {
      // Unset when beforeAll could not start a server; its own error says why.
      await redis?.stop();
    });

    it('answers PING', async () => {
      expect(await pingRedis(redis.host, redis.port)).toBe('pong');
      const client = await createClient({ url: redis.url }).connect();
      try {
        expect(await client.ping()).toBe('PONG');
      } finally {
        client.destroy();
      }
    });

    it('stops answering while paused and answers again after resume', async () => {
      await redis.pause();
      try {
        expect(await pingRedis(redis.host, redis.port, 300)).toBe('timeout');
      } finally {
        await redis.resume();
      }
      expect(await pingRedis(redis.host, redis.port)).toBe('pong');
    });

    it('comes back empty on the same port after kill + restart', async () => {
      const key = `${uniquePrefix('restart')}k`;
      const port = redis.port;
      const client = createClient({ url: redis.url, socket: { reconnectStrategy: false } });
      client.on('error', () => {});
      await client.connect();
      try {
        await client.set(key, 'v');
        expect(await client.get(key)).toBe('v');
      } finally {
        client.destroy();
      }

      await redis.kill();
      expect(await pingRedis(redis.host, redis.port)).toBe('refused');

      await redis.restart();
      expect(redis.port).toBe(port);
      const again = await createClient({ url: redis.url }).connect();
      try {
        expect(await again.get(key)).toBeNull();
      } finally {
        again.destroy();
      }
    });
  });

  describe('with the shared server', () => {
    let url: string;

    beforeAll(async () => {
      ({ url } = await sharedRedis());
    });

    it('monitors the commands of another connection', async () => {
      const monitor = await monitorCommands(url);
      const client = await createClient({ url }).connect();
      try {
        const key = `${uniquePrefix('monitor')}k`;
        const value = 'say "hi" \\ bye\n';
        const addr = await clientAddr(client);
        await client.set(key, value);
        await monitor.waitFor(() =>
          commandsFrom(monitor.lines, { clientAddr: addr }).some((c) => c[0] === 'SET'),
        );
        const sets = commandsFrom(monitor.lines, { clientAddr: addr }).filter((c) => c[0] === 'SET');
        expect(sets).toEqual([['SET', key, value]]);
      } finally {
        client.destroy();
        await monitor.stop();
      }
    });

    it('parses script-internal lines and escapes', () => {
      const lines = [
        '1700000000.000001 [0 127.0.0.1:50000] "EVALSHA" "abc" "1" "k\\x00\\"q\\""',
        '1700000000.000002 [0 lua] "hincrby" "k" "f" "1"',
      ];
      expect(commandsFrom(lines)).toEqual([
        ['EVALSHA', 'abc', '1', 'k\x00"q"'],
        ['hincrby', 'k', 'f', '1'],
      ]);
      expect(commandsFrom(lines, { excludeLua: true })).toHaveLength(1);
      expect(commandsFrom(lines, { clientAddr: 'lua' })).toEqual([['hincrby', 'k', 'f', '1']]);
    });
  });

  it('round-trips messages with a child worker', async () => {
    const worker = spawnWorker(ECHO_WORKER, { HARNESS_TEST: '1' });
    try {
      await worker.next((msg) => msg['type'] === 'ready');
      worker.send({ type: 'echo', value: { n: 42 } });
      const reply = await worker.next((msg) => msg['type'] === 'echo');
      expect(reply['value']).toEqual({ n: 42 });
      expect(reply['pid']).toBe(worker.pid);
      expect(typeof reply.t).toBe('string');
      expect(worker.logs).toContain('echo worker starting');

      worker.send({ type: 'exit' });
      expect(await worker.exited).toEqual({ code: 0, signal: null });
    } finally {
      await worker.stop();
    }
  });
});
