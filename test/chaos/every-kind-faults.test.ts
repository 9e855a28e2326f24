/**
 * Faults every kind must ride out, run over every kind (test/support/every-kind.ts), on a
 * redis-server of this file's own (they hit every client of a server):
 * - an abort while an attempt is in flight (Redis paused by SIGSTOP): the wait rejects at once
 *   with exactly `signal.reason`, while Redis is still paused, and once Redis runs again the caller
 *   left nothing behind — no entry, no hold or permit its attempt took, no subscription;
 * - a write whose connection is killed (CLIENT KILL) after Redis ran it and before its reply went
 *   out is retried on a new connection and takes effect once;
 * - SCRIPT FLUSH before every step, a wait included: everything still works (EVAL fallback);
 * - CLIENT KILL of the subscriber connections while a waiter is parked: it still gets the resource
 *   promptly once it frees, whether that happens before or after it resubscribed.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LockClient, LockLostError, type LockLostEvent } from '../../src/index.js';
import { luaScripts } from '../../src/scripts/generated.js';
import { commandsOf, interceptCommands, type LockConnection } from '../support/clients.js';
import { EVERY_KIND, residue, skips, titled, type Scene, type Waitable } from '../support/every-kind.js';
import { uniquePrefix } from '../support/keys.js';
import { clientAddr, commandsFrom } from '../support/monitor.js';
import { startRedis, type RedisInstance } from '../support/redis-server.js';
import { testResources, type Redis } from '../support/resources.js';
import { settle, sleep, waitUntil, within, type Settled } from '../support/wait.js';

/** From abort() to the rejection, with Redis paused. */
const ABORT_BOUND_MS = 150;
/** How long Redis stays paused after an abort: shorter than the default command timeout. */
const PAUSED_AFTER_ABORT_MS = 500;
/** How soon after Redis resumes an aborted caller must have left nothing behind. */
const CLEAN_WITHIN_MS = 3_000;
/**
 * How soon a parked waiter must have the resource once it frees. Far below its own timers (its
 * holder's 30 s watchdog lease, a fair-lock waiter's re-ask every 3.3 s): only the message, or
 * the re-check after its subscriber reconnected, can explain it.
 */
const WOKEN_WITHIN_MS = 1_500;
/**
 * How soon a waiter whose subscriber connection was killed must have the resource once it frees:
 * its re-check on reconnect, or the message once it resubscribed.
 */
const KILLED_WOKEN_WITHIN_MS = 1_000;
/** The waiters' subscription linger, so a test sees a subscription dropped. */
const LINGER_MS = 50;

describe('every kind under server-wide faults', () => {
  let server: RedisInstance;
  let admin: Redis;
  const perFile = testResources(() => server.url);
  const res = testResources(() => server.url);

  beforeAll(async () => {
    // Paused, DEBUG SLEEP, SCRIPT FLUSH and killed connections: a server of this file's own.
    server = await startRedis({ args: ['--enable-debug-command', 'yes'] });
    admin = await perFile.connect();
  });

  afterEach(async () => {
    // A test that failed halfway may have left the server paused.
    await server.resume();
    await res.closeAll();
  });

  afterAll(async () => {
    await perFile.closeAll();
    // Unset when beforeAll could not start a server; its own error says why.
    await server?.stop();
  });

  describe.each(EVERY_KIND)('$name', (waitable: Waitable) => {
    interface Stage extends Scene {
      /** The waiter's (or caller's) client, on a connection of its own. */
      readonly waiter: LockClient;
      /** Its connection, to ask for its CLIENT ID and address. */
      readonly connection: LockConnection;
      /** How many script calls (EVALSHA or EVAL) the waiter's client has handed to its connection. */
      readonly scriptCalls: () => number;
    }

    async function stage(label: string, subscriptionLingerMs = LINGER_MS): Promise<Stage> {
      const keyPrefix = uniquePrefix(`every-faults-${waitable.name}-${label}`);
      const name = 'exports:nightly';
      const connection = await res.connectLocks();
      let scriptCalls = 0;
      const observed = interceptCommands(connection, (args) => {
        if (args[0] === 'EVALSHA' || args[0] === 'EVAL') scriptCalls += 1;
        return undefined;
      });
      return {
        holder: await res.lockClient({ keyPrefix }),
        other: await res.lockClient({ keyPrefix }),
        waiter: res.track(new LockClient(observed, { keyPrefix, subscriptionLingerMs })),
        connection,
        scriptCalls: () => scriptCalls,
        admin,
        name,
        key: keyPrefix + name,
      };
    }

    /**
     * A wait on another name, parked until that resource is freed, so the waiter's client has
     * checked the server, has the scripts, and listens for whatever its kind hands over (a lock's
     * later attempts then carry a wait-queue entry): the call held up in a test is the kind's own.
     */
    async function warmUp(scene: Stage): Promise<void> {
      const warm = { ...scene, name: `${scene.name}:warm-up`, key: `${scene.key}:warm-up` };
      const blocked = await waitable.frees[0].block(warm);
      const before = await subscribers(warm);
      const waiting = waitable.wait(scene.waiter, warm.name, { waitMs: 10_000 });
      waiting.catch(() => undefined);
      await parked(warm, before);
      await blocked.free();
      await (await within(waiting, 10_000, 'the warm-up wait')).give();
    }

    const subscribers = (scene: Scene): Promise<number> => res.numsub(waitable.channel(scene.key));

    /** Resolves once the waiter listens on the kind's channel and has had time to park. */
    async function parked(scene: Scene, before: number): Promise<void> {
      await waitUntil('the waiter is subscribed', async () => (await subscribers(scene)) > before, 5_000);
      // Its attempt after the subscription is confirmed comes back, and it parks.
      await sleep(200);
    }

    describe('abort while an attempt is in flight', () => {
      /** Starts a wait with Redis paused, aborts it, and checks what it did and left. */
      async function abortInFlight(scene: Stage): Promise<void> {
        await warmUp(scene);
        const before = await residue(admin, scene.key);
        const subscribersBefore = await subscribers(scene);
        const controller = new AbortController();
        const reason = { why: 'the export was cancelled' };

        const callsBefore = scene.scriptCalls();
        await server.pause();
        const waiting = settle(waitable.wait(scene.waiter, scene.name, { signal: controller.signal }));
        // Its attempt goes to a server that does not answer.
        await waitUntil('the attempt is sent', () => scene.scriptCalls() > callsBefore, 2_000);
        await sleep(50);
        const abortedAt = performance.now();
        controller.abort(reason);
        const settled: Settled<unknown> | undefined = await Promise.race([
          waiting,
          sleep(PAUSED_AFTER_ABORT_MS).then(() => undefined),
        ]);
        await sleep(abortedAt + PAUSED_AFTER_ABORT_MS - performance.now());
        const resumedAt = performance.now();
        await server.resume();

        expect(settled, 'the aborted wait was still pending while Redis was paused').toBeDefined();
        expect(settled?.error, 'the rejection is exactly signal.reason').toBe(reason);
        expect((settled?.at ?? Number.POSITIVE_INFINITY) - abortedAt).toBeLessThanOrEqual(ABORT_BOUND_MS);
        expect((settled?.at ?? Number.POSITIVE_INFINITY) < resumedAt).toBe(true);

        // Once Redis has answered the attempt, the caller's client undoes whatever it did.
        let now: string[] = [];
        await waitUntil(
          'the aborted caller left nothing behind',
          async () => {
            now = await residue(admin, scene.key);
            return JSON.stringify(now) === JSON.stringify(before);
          },
          CLEAN_WITHIN_MS,
        ).catch(() => undefined);
        expect(now).toEqual(before);
        // Nor does a watchdog bring anything back.
        await sleep(200);
        expect(await residue(admin, scene.key)).toEqual(before);
        await waitUntil(
          "the aborted caller's subscription is dropped",
          async () => (await subscribers(scene)) <= subscribersBefore,
          CLEAN_WITHIN_MS,
        );
      }

      it.skipIf(skips(waitable, 'abort'))(
        titled(waitable, 'abort', 'with the resource taken: rejects at once, leaves nothing'),
        async () => {
          const scene = await stage('abort-blocked');
          await waitable.frees[0].block(scene);
          await abortInFlight(scene);
        },
      );

      it.skipIf(skips(waitable, 'abort'))(
        titled(waitable, 'abort', 'with the resource available: rejects at once, keeps nothing it took'),
        async () => {
          const scene = await stage('abort-available');
          await waitable.available(scene);
          await abortInFlight(scene);
        },
      );
    });

    it.skipIf(skips(waitable, 'idempotentRetries'))(
      titled(
        waitable,
        'idempotentRetries',
        `${waitable.once.what} whose reply is lost to CLIENT KILL is retried and takes effect once`,
      ),
      async () => {
        const scene = await stage('idempotent');
        const { once } = waitable;
        await once.ready(scene);
        await warmUp(scene);
        const levelBefore = await once.level(admin, scene.key);
        const redis = commandsOf(scene.connection);
        const id = Number(await redis.sendCommand(['CLIENT', 'ID']));
        const addr = await clientAddr(redis);
        const sleeper = await res.connect();
        const killer = await res.connect();
        const watch = await res.monitor();

        // While the server sleeps, the call and then the kill of its connection queue up. The
        // server reads them in that order once it wakes: it runs the call, then kills the
        // connection before the reply is written. MONITOR omits DEBUG; the ECHO pipelined behind
        // it runs the moment the sleep ends.
        const marker = `slept-${scene.key}`;
        const sleeping = Promise.all([
          sleeper.sendCommand(['DEBUG', 'SLEEP', '0.3']),
          sleeper.sendCommand(['ECHO', marker]),
        ]);
        await sleep(50);
        const calling = settle(once.call(scene.waiter, scene.name));
        await sleep(30);
        const killed = await killer.sendCommand(['CLIENT', 'KILL', 'ID', String(id)]);
        await sleeping;
        expect(Number(killed)).toBe(1);

        const outcome = await within(calling, 20_000, 'the retried call');
        expect(outcome.error).toBeUndefined();
        expect(await once.level(admin, scene.key)).toBe(levelBefore + once.step);
        // The retry went out on a new connection.
        expect(Number(await redis.sendCommand(['CLIENT', 'ID']))).not.toBe(id);
        // The first copy ran on the killed connection, after the sleep: its reply was lost.
        const isScript = (cmd: readonly string[]): boolean => cmd[0] === 'EVALSHA' || cmd[0] === 'EVAL';
        await watch.waitFor((lines) =>
          commandsFrom(lines, { excludeLua: true }).some((cmd) => cmd[0] === 'ECHO' && cmd[1] === marker),
        );
        const commands = commandsFrom(watch.lines, { excludeLua: true });
        const sleptAt = commands.findIndex((cmd) => cmd[0] === 'ECHO' && cmd[1] === marker);
        const firstCopies = commandsFrom(watch.lines, { clientAddr: addr }).filter(isScript);
        expect(sleptAt).toBeGreaterThanOrEqual(0);
        expect(firstCopies.length, 'the call ran on the connection that was killed').toBeGreaterThanOrEqual(
          1,
        );
      },
    );

    describe('SCRIPT FLUSH', () => {
      const shas = Object.values(luaScripts).map((script) => script.sha1);
      /** Empties the script cache and checks it is empty, in one transaction. */
      const flush = async (): Promise<void> => {
        const replies = await admin
          .multi()
          .addCommand(['SCRIPT', 'FLUSH'])
          .addCommand(['SCRIPT', 'EXISTS', ...shas])
          .exec();
        expect(replies[1]).toEqual(shas.map(() => 0));
      };

      it.skipIf(skips(waitable, 'scriptFlush'))(
        titled(waitable, 'scriptFlush', 'before every step, a parked wait included, breaks nothing'),
        async () => {
          const scene = await stage('script-flush');
          await flush();
          const blocked = await waitable.frees[0].block(scene);
          await flush();
          const before = await subscribers(scene);
          let gotAt: number | undefined;
          const waiting = waitable.wait(scene.waiter, scene.name, { waitMs: 20_000 }).then((got) => {
            gotAt = performance.now();
            return got;
          });
          waiting.catch(() => undefined);
          await parked(scene, before);
          await flush();
          const freedAt = performance.now();
          await blocked.free();
          const got = await within(waiting, 20_000, 'the wait across SCRIPT FLUSH');
          expect((gotAt ?? Number.POSITIVE_INFINITY) - freedAt).toBeLessThan(WOKEN_WITHIN_MS);
          await flush();
          await got.give();
          await flush();
          // And once more from the start, with an empty cache.
          const again = await waitable.wait(scene.waiter, scene.name, { waitMs: 5_000 });
          await again.give();
        },
      );

      // Renewal and loss are a lease's: the kinds without one say why under lossAfterFreeze.
      const held = waitable.kind;

      it.skipIf(skips(waitable, 'scriptFlush') || held === undefined)(
        titled(waitable, 'lossAfterFreeze', 'the watchdog keeps renewing a hold across flushes'),
        async () => {
          if (held === undefined) return;
          const keyPrefix = uniquePrefix(`every-faults-${waitable.name}-renew`);
          // A lease of 1 s, renewed every third: a stall must pass 600 ms to lose it (with
          // 300 ms, one of 200 ms at load 13 did).
          const locks = await res.lockClient({ keyPrefix, watchdogTimeoutMs: 1_000 });
          const lost: LockLostEvent[] = [];
          locks.on('lockLost', (event) => lost.push(event));
          const lease = await held.handle(locks, 'reports:daily').acquire();
          await flush();
          // Held for more than three leases, the script cache emptied again along the way.
          for (let slice = 0; slice < 5; slice += 1) {
            await sleep(600);
            await flush();
          }
          // The next renewal loads its script again, within a third of the lease.
          await waitUntil(
            'a renewal after the last flush',
            async () =>
              Number(
                (
                  await admin.sendCommand<unknown[]>(['SCRIPT', 'EXISTS', luaScripts[held.renewScript].sha1])
                )[0],
              ) === 1,
            1_000,
          );
          expect(lost).toEqual([]);
          expect(lease.signal.aborted).toBe(false);
          const snapshot = await held.inspect(admin, lease.key);
          expect(snapshot.owners).toBe(1);
          if (held.keyType === 'hash') expect(snapshot.counts).toEqual([1]);
          expect(snapshot.pttl).toBeGreaterThan(0);
          expect(snapshot.pttl).toBeLessThanOrEqual(1_000);
          const renewed = await admin.sendCommand<unknown[]>([
            'SCRIPT',
            'EXISTS',
            luaScripts[held.renewScript].sha1,
          ]);
          expect(renewed.map(Number)).toEqual([1]);
          await lease.release();
          expect((await held.inspect(admin, lease.key)).owners).toBe(0);
        },
      );

      it.skipIf(skips(waitable, 'scriptFlush') || held === undefined)(
        titled(
          waitable,
          'lossAfterFreeze',
          'forceUnlock after a flush tells the local holder it lost its hold',
        ),
        async () => {
          if (held === undefined) return;
          const keyPrefix = uniquePrefix(`every-faults-${waitable.name}-force`);
          const locks = await res.lockClient({ keyPrefix });
          const handle = held.handle(locks, 'carts:7');
          const lease = await handle.acquire();
          await flush();
          expect(await handle.forceUnlock()).toBe(true);
          expect(lease.signal.aborted).toBe(true);
          expect(lease.signal.reason).toBeInstanceOf(LockLostError);
          expect((lease.signal.reason as LockLostError).reason).toBe('force-unlocked');
          expect(await handle.isLocked()).toBe(false);
        },
      );
    });

    describe('CLIENT KILL TYPE pubsub while a waiter is parked', () => {
      const killPubsub = async (): Promise<number> =>
        Number(await admin.sendCommand(['CLIENT', 'KILL', 'TYPE', 'pubsub']));

      async function killedWhileParked(
        label: string,
        freeWhen: 'at once' | 'after resubscribing',
      ): Promise<void> {
        // The default linger: the subscription, once restored, stays for later waiters.
        const scene = await stage(label, 5_000);
        const blocked = await waitable.frees[0].block(scene);
        const before = await subscribers(scene);
        let gotAt: number | undefined;
        const waiting = waitable.wait(scene.waiter, scene.name, { waitMs: 20_000 }).then((got) => {
          gotAt = performance.now();
          return got;
        });
        waiting.catch(() => undefined);
        await parked(scene, before);
        const listening = await subscribers(scene);

        expect(await killPubsub()).toBeGreaterThanOrEqual(1);
        if (freeWhen === 'after resubscribing') {
          await waitUntil(
            'the subscriptions are back',
            async () => (await subscribers(scene)) >= listening,
            5_000,
          );
          // Resubscribed is not yet re-checked: let the waiter go back to its wait.
          await sleep(200);
        }
        expect(gotAt, 'the waiter got it before it was freed').toBeUndefined();
        const freedAt = performance.now();
        await blocked.free();
        const got = await within(waiting, 10_000, 'the waiter after its subscriber was killed');
        expect((gotAt ?? Number.POSITIVE_INFINITY) - freedAt).toBeLessThan(KILLED_WOKEN_WITHIN_MS);
        await got.give();
        if (waitable.kind !== undefined)
          expect((await waitable.kind.inspect(admin, scene.key)).owners).toBe(0);
        // The subscription is restored for later waiters too.
        await waitUntil('the subscription is restored', async () => (await subscribers(scene)) >= 1, 5_000);
      }

      it.skipIf(skips(waitable, 'connectionKill'))(
        titled(waitable, 'connectionKill', 'freed at once after the kill: the waiter gets it promptly'),
        async () => {
          await killedWhileParked('kill-now', 'at once');
        },
      );

      it.skipIf(skips(waitable, 'connectionKill'))(
        titled(
          waitable,
          'connectionKill',
          'freed after the waiter resubscribed: the waiter gets it promptly',
        ),
        async () => {
          await killedWhileParked('kill-later', 'after resubscribing');
        },
      );
    });
  });
});
