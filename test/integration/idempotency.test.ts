/**
 * Requests whose outcome is unknown (no reply in time, connection killed mid-call) are retried
 * or cancelled without ever being applied twice: a release never decrements twice, a late copy
 * of a release never touches the next holder, and an acquire given up on leaves no hidden hold.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LockClient, LockError } from '../../src/index.js';
import { luaScripts } from '../../src/scripts/generated.js';
import { uniquePrefix } from '../support/keys.js';
import { commandsFrom } from '../support/monitor.js';
import { startRedis, type RedisInstance } from '../support/redis-server.js';
import { commandsOf } from '../support/clients.js';
import { channelOf, testResources, type Redis } from '../support/resources.js';
import { settle, sleep, waitUntil } from '../support/wait.js';

/** Calls of one script on one key seen by MONITOR (EVALSHA only: the scripts are preloaded). */
function scriptCalls(lines: readonly string[], script: keyof typeof luaScripts, key: string): string[][] {
  return commandsFrom(lines, { excludeLua: true }).filter(
    (cmd) => cmd[0] === 'EVALSHA' && cmd[1] === luaScripts[script].sha1 && cmd[3] === key,
  );
}

/** Commands that scripts ran on `key` (MONITOR shows them with the address `lua`). */
function scriptEffects(lines: readonly string[], key: string): string[][] {
  return commandsFrom(lines, { clientAddr: 'lua' }).filter((cmd) => cmd[1] === key);
}

describe('idempotent retries of requests with an unknown outcome', () => {
  let server: RedisInstance;
  let admin: Redis;
  const perFile = testResources(() => server.url);
  const res = testResources(() => server.url);

  /** Runs `during` with the server frozen for about `ms`; always thaws it. */
  async function paused(ms: number, during: () => void | Promise<void>): Promise<void> {
    await server.pause();
    try {
      const startedAt = performance.now();
      await during();
      await sleep(Math.max(0, ms - (performance.now() - startedAt)));
    } finally {
      await server.resume();
    }
  }

  beforeAll(async () => {
    // Paused, killed connections and DEBUG SLEEP: a server of this file's own.
    server = await startRedis({ args: ['--enable-debug-command', 'yes'] });
    admin = await perFile.connect();
    // Preload every script, so a request held up by the pause runs as it is sent instead of
    // failing with NOSCRIPT.
    for (const script of Object.values(luaScripts)) {
      await admin.sendCommand(['SCRIPT', 'LOAD', script.source]);
    }
  });

  afterEach(() => res.closeAll());

  afterAll(async () => {
    await perFile.closeAll();
    // Unset when beforeAll could not start a server; its own error says why.
    await server?.stop();
  });

  describe('a release whose reply is lost', () => {
    it('is retried without decrementing twice (hold count 2 -> 1)', async () => {
      const prefix = uniquePrefix('idem-release-partial');
      const key = `${prefix}invoice:42`;
      const locks = await res.lockClient({ keyPrefix: prefix, commandTimeoutMs: 200 });
      const lock = locks.lock('invoice:42');
      const watch = await res.monitor();

      await lock.withLock(async (outer) => {
        const inner = await lock.acquire();
        expect(inner.holdCount).toBe(2);
        const [field] = await admin.hKeys(key);
        if (field === undefined) throw new Error('the lock has no owner field');

        let releasing: Promise<{ error?: unknown }> | undefined;
        await paused(500, () => {
          // Written to the socket, unanswered: latchkey's own timeout makes the outcome unknown.
          releasing = settle(inner.release());
        });
        expect((await releasing)?.error).toBeUndefined();
        expect(await admin.hGet(key, field)).toBe('1');
        expect(outer.holdCount).toBe(1);

        // More than one copy of the request reached Redis, and only one decremented.
        await watch.waitFor((lines) => scriptCalls(lines, 'lock/release', key).length >= 2);
        const copies = scriptCalls(watch.lines, 'lock/release', key);
        expect(
          scriptEffects(watch.lines, key).filter((cmd) => cmd[0] === 'hincrby' && cmd[3] === '-1'),
        ).toHaveLength(1);

        // Copies arriving even later change nothing either.
        for (const copy of copies) expect(await admin.sendCommand(copy)).toBe(0);
        expect(await admin.hGet(key, field)).toBe('1');
      });
      expect(await admin.exists(key)).toBe(0);
    });

    it('is retried as one full release that never touches the next holder', async () => {
      const prefix = uniquePrefix('idem-release-full');
      const key = `${prefix}invoice:43`;
      const locks = await res.lockClient({ keyPrefix: prefix, commandTimeoutMs: 200 });
      const next = await res.lockClient({ keyPrefix: prefix });
      const watch = await res.monitor();

      const lease = await locks.lock('invoice:43').acquire();
      // The next holder is already waiting: it takes the lock the moment the release runs,
      // while copies of that release may still be on their way.
      let nextGotIt = false;
      const nextWaiting = next
        .lock('invoice:43')
        .acquire({ waitMs: 10_000 })
        .then((got) => {
          nextGotIt = true;
          return got;
        });
      await waitUntil('the next holder waits', async () => (await res.numsub(channelOf(key))) === 1);
      await sleep(50);
      expect(nextGotIt).toBe(false);

      let releasing: Promise<{ error?: unknown }> | undefined;
      await paused(500, () => {
        releasing = settle(lease.release());
      });
      expect((await releasing)?.error).toBeUndefined();

      const nextLease = await nextWaiting;
      const nextFields = await admin.hKeys(key);
      expect(nextFields).toHaveLength(1);
      const [nextField] = nextFields;
      if (nextField === undefined) throw new Error('the next holder has no field');

      await watch.waitFor((lines) => scriptCalls(lines, 'lock/release', key).length >= 2);
      const copies = scriptCalls(watch.lines, 'lock/release', key);
      // Late copies of the first holder's release find its field gone: they change nothing and
      // leave the next holder alone.
      for (const copy of copies) expect(await admin.sendCommand(copy)).toBeNull();
      expect(await admin.hGetAll(key)).toEqual({ [nextField]: '1' });
      expect(Number(await admin.pTTL(key))).toBeGreaterThan(20_000);
      expect(nextLease.signal.aborted).toBe(false);
      // The first holder's field went out once: the hand-over replaced it with the next one's.
      // (A late copy's HDEL of the empty field, which no owner has, deletes nothing: it only
      // makes the copy fail on a replica.)
      expect(
        scriptEffects(watch.lines, key).filter(
          (cmd) => cmd[0] === 'del' || (cmd[0] === 'hdel' && cmd[2] !== ''),
        ),
      ).toHaveLength(1);

      await nextLease.release();
      expect(await admin.exists(key)).toBe(0);
    });

    it('is retried after its connection is killed mid-call, without decrementing twice', async () => {
      const prefix = uniquePrefix('idem-release-kill');
      const key = `${prefix}invoice:44`;
      const connection = await res.connectLocks();
      const redis = commandsOf(connection);
      const locks = res.track(new LockClient(connection, { keyPrefix: prefix }));
      const sleeper = await res.connect();
      const killer = await res.connect();
      const lock = locks.lock('invoice:44');
      const watch = await res.monitor();

      await lock.withLock(async (outer) => {
        const inner = await lock.acquire();
        expect(inner.holdCount).toBe(2);
        const [field] = await admin.hKeys(key);
        if (field === undefined) throw new Error('the lock has no owner field');
        const id = Number(await redis.sendCommand(['CLIENT', 'ID']));

        // While the server sleeps, the release and then the kill of its connection queue up;
        // the server runs the release first (its reply is then lost) or never.
        // MONITOR omits DEBUG; the ECHO pipelined behind it runs the moment the sleep ends.
        const marker = `slept-${prefix}`;
        const sleeping = Promise.all([
          sleeper.sendCommand(['DEBUG', 'SLEEP', '0.3']),
          sleeper.sendCommand(['ECHO', marker]),
        ]);
        await sleep(50);
        const releasing = settle(inner.release());
        await sleep(30);
        const killed = await killer.sendCommand(['CLIENT', 'KILL', 'ID', String(id)]);
        await sleeping;
        expect(Number(killed)).toBe(1);

        expect((await releasing).error).toBeUndefined();
        expect(await admin.hGet(key, field)).toBe('1');
        expect(outer.holdCount).toBe(1);
        // The retry went out on a new connection.
        expect(Number(await redis.sendCommand(['CLIENT', 'ID']))).not.toBe(id);
        // The release was queued behind the sleep (MONITOR lists commands as they run).
        await watch.waitFor((lines) => scriptCalls(lines, 'lock/release', key).length >= 1);
        const commands = commandsFrom(watch.lines, { excludeLua: true });
        const sleptAt = commands.findIndex((cmd) => cmd[0] === 'ECHO' && cmd[1] === marker);
        const releasedAt = commands.findIndex(
          (cmd) => cmd[0] === 'EVALSHA' && cmd[1] === luaScripts['lock/release'].sha1 && cmd[3] === key,
        );
        expect(sleptAt).toBeGreaterThanOrEqual(0);
        expect(releasedAt).toBeGreaterThan(sleptAt);
      });
      expect(await admin.exists(key)).toBe(0);
    });
  });

  describe('an acquire given up on with an unknown outcome', () => {
    it('leaves no hidden hold: the lock is free again and a late copy is refused', async () => {
      const prefix = uniquePrefix('idem-acquire');
      const key = `${prefix}coupon:7`;
      const locks = await res.lockClient({ keyPrefix: prefix, commandTimeoutMs: 100 });
      const other = await res.lockClient({ keyPrefix: prefix });
      const watch = await res.monitor();

      let outcome: { value?: unknown; error?: unknown } = {};
      await paused(0, async () => {
        // The lock is free: the request is applied as soon as the server reads it, but no
        // reply comes in time.
        outcome = await Promise.race([
          settle(locks.lock('coupon:7').acquire({ waitMs: 300 })),
          sleep(5_000).then(() => ({ error: new Error('acquire did not give up within 5 s') })),
        ]);
      });
      expect(outcome.value).toBeUndefined();
      expect(outcome.error).toBeInstanceOf(LockError);
      expect(['REDIS_ERROR', 'ACQUIRE_TIMEOUT']).toContain((outcome.error as LockError).code);

      await waitUntil('the lock is free', async () => (await admin.exists(key)) === 0, 1_000);
      // It really had been applied, and was undone.
      await watch.waitFor((lines) => scriptEffects(lines, key).some((cmd) => cmd[0] === 'del'));
      const effects = scriptEffects(watch.lines, key);
      expect(
        effects.filter((cmd) => (cmd[0] === 'hset' || cmd[0] === 'hincrby') && cmd[3] === '1'),
      ).toHaveLength(1);
      expect(effects.filter((cmd) => cmd[0] === 'del')).toHaveLength(1);

      const startedAt = performance.now();
      const taken = await other.lock('coupon:7').tryAcquire();
      expect(taken).not.toBeNull();
      expect(performance.now() - startedAt).toBeLessThan(500);
      const fields = await admin.hKeys(key);
      expect(fields).toHaveLength(1);

      // A copy of the given-up request arriving while someone else holds the lock finds nothing
      // to take and changes nothing.
      const cancelled = new Set(scriptCalls(watch.lines, 'lock/cancel-acquire', key).map((cmd) => cmd[4]));
      expect(cancelled.size).toBe(1);
      const copies = scriptCalls(watch.lines, 'lock/acquire', key).filter((cmd) => cancelled.has(cmd[4]));
      expect(copies.length).toBeGreaterThanOrEqual(2);
      for (const copy of copies) {
        // Held by another owner: the reply is {pttl, queued}.
        const reply: unknown = await admin.sendCommand(copy);
        expect(Array.isArray(reply) && Number(reply[0]) > 0).toBe(true);
      }
      expect(await admin.hKeys(key)).toEqual(fields);
      expect(await admin.hVals(key)).toEqual(['1']);
      await taken?.release();
      expect(await admin.exists(key)).toBe(0);

      // Arriving once the lock is free, it is refused: the lock stays free.
      for (const copy of copies) expect(await admin.sendCommand(copy)).toBe(-3);
      expect(await admin.exists(key)).toBe(0);
    });
  });

  describe('a last release that Redis could not confirm', () => {
    it('rejects with REDIS_ERROR, and a second release() reports what the first one did', async () => {
      const keyPrefix = uniquePrefix('release-retry');
      // A last release is retried for twice the command timeout, at least 1 s.
      const locks = await res.lockClient({ keyPrefix, commandTimeoutMs: 100 });
      // The 30 s watchdog lease outlives the pause: the lock is still there when Redis is back.
      const lease = await locks.lock('invoice:77').acquire();
      const key = lease.key;

      await server.pause();
      let first: Awaited<ReturnType<typeof settle<void>>>;
      try {
        first = await settle(lease.release());
      } finally {
        await server.resume();
      }
      expect(first.error).toBeInstanceOf(LockError);
      expect((first.error as LockError).code).toBe('REDIS_ERROR');
      expect(lease.released).toBe(false);

      // On resume the buffered release runs: the lock is deleted.
      await waitUntil('the buffered release ran', async () => (await admin.exists(key)) === 0, 2_000);

      // Asked again within the lease, the missing field means the first release went through:
      // "released", not "not the owner".
      await expect(lease.release()).resolves.toBeUndefined();
      expect(lease.released).toBe(true);
      expect(lease.signal.aborted).toBe(false);
    });
  });
});
