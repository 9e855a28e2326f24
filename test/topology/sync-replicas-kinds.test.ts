/**
 * `syncReplicas` for a Semaphore and a CountDownLatch against a real master with two replicas:
 * WAIT goes right behind each of their writes; a semaphore grant too few replicas acknowledged
 * is given back (the count ends where it started) and the acquire fails with ReplicationError;
 * writes that cannot be undone resolve and report the shortfall on the `error` event.
 */
import { createClient, type RedisClientType } from 'redis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LockClient, ReplicationError, type LockClientOptions } from '../../src/index.js';
import { clientAddr, commandsFrom, monitorCommands, type CommandMonitor } from '../support/monitor.js';
import { startReplicated, type Replicated } from '../support/replication.js';

const LOOPBACK = '127.0.0.1';

describe('syncReplicas for semaphores and latches', () => {
  let cluster: Replicated;
  let masterPort: number;
  const clients: RedisClientType[] = [];
  const lockClients: LockClient[] = [];
  let monitor: CommandMonitor | undefined;

  async function connect(port: number): Promise<RedisClientType> {
    const client: RedisClientType = createClient({ socket: { host: LOOPBACK, port } });
    client.on('error', () => undefined);
    await client.connect();
    clients.push(client);
    return client;
  }

  /** A client whose `error` events land in `errors`. */
  function locksOn(
    redis: RedisClientType,
    options: LockClientOptions,
  ): { locks: LockClient; errors: Error[] } {
    const locks = new LockClient(redis, { keyPrefix: `sync-kinds:${lockClients.length}:`, ...options });
    const errors: Error[] = [];
    locks.on('error', (error) => errors.push(error));
    lockClients.push(locks);
    return { locks, errors };
  }

  beforeAll(async () => {
    cluster = await startReplicated();
    masterPort = await cluster.masterPort();
  }, 60_000);

  afterEach(async () => {
    await Promise.all(lockClients.splice(0).map((locks) => locks.close()));
    await monitor?.stop();
    monitor = undefined;
    for (const node of cluster.nodes) node.resume();
  });

  afterAll(async () => {
    await Promise.all(clients.splice(0).map((client) => client.close().catch(() => undefined)));
    await cluster?.stop();
  });

  it('sends WAIT right behind every write of a semaphore and of a latch', async () => {
    const redis = await connect(masterPort);
    const addr = await clientAddr(redis);
    // WAIT returns as soon as both replicas acknowledge; the long timeout only keeps a loaded
    // machine from turning a slow acknowledgement into a shortfall (a rollback and a retry).
    const { locks, errors } = locksOn(redis, { syncReplicas: { count: 2, timeoutMs: 5_000 } });
    const run = async (round: number): Promise<void> => {
      const semaphore = locks.semaphore(`monitored-${round}`);
      expect(await semaphore.trySetPermits(3)).toBe(true);
      await semaphore.acquire();
      await semaphore.release();
      await semaphore.addPermits(2);
      expect(await semaphore.drainPermits()).toBe(5);
      expect(await semaphore.delete()).toBe(true);
      const latch = locks.countDownLatch(`monitored-latch-${round}`);
      expect(await latch.trySetCount(2)).toBe(true);
      expect(await latch.countDown()).toBe(1);
      expect(await latch.delete()).toBe(true);
    };
    // Past the first calls: the server check, INFO persistence, script loading.
    await run(0);
    monitor = await monitorCommands(`redis://${LOOPBACK}:${masterPort}`);
    await run(1);
    await monitor.waitFor((lines) => commandsFrom(lines, { clientAddr: addr }).length >= 18);
    const sent = commandsFrom(monitor.lines, { clientAddr: addr }).map((command) =>
      command[0] === 'EVALSHA' ? 'script' : command.join(' '),
    );
    expect(sent).toEqual(Array.from({ length: 9 }, () => ['script', 'WAIT 2 5000']).flat());
    expect(errors).toEqual([]);
  });

  it('a semaphore grant acknowledged by all the replicas asked for is on them when acquire resolves', async () => {
    const redis = await connect(masterPort);
    const { locks } = locksOn(redis, { syncReplicas: { count: 2, timeoutMs: 1_000 } });
    const replicas = await Promise.all((await cluster.replicas()).map((node) => connect(node.port)));
    expect(replicas).toHaveLength(2);
    const semaphore = locks.semaphore('replicated', { permits: 20 });
    for (let i = 1; i <= 10; i += 1) {
      await semaphore.acquire();
      // Read at once, without waiting: WAIT already made sure.
      for (const replica of replicas) expect(await replica.get(semaphore.key)).toBe(String(20 - i));
    }
  });

  it('more replicas asked for than exist: acquire and drain fail with ReplicationError and take nothing', async () => {
    const redis = await connect(masterPort);
    const admin = await connect(masterPort);
    const { locks } = locksOn(redis, { syncReplicas: { count: 3, timeoutMs: 100 } });
    const semaphore = locks.semaphore('too-many');
    await admin.set(semaphore.key, '5');
    for (const take of [
      () => semaphore.acquire(2, { waitMs: 0 }),
      () => semaphore.tryAcquire(),
      () => semaphore.drainPermits(),
    ]) {
      const error = await take().catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(ReplicationError);
      expect(error).toMatchObject({ code: 'NOT_REPLICATED', acknowledged: 2, required: 3 });
      // The grant was given back before the call rejected.
      expect(await admin.get(semaphore.key)).toBe('5');
    }
  });

  it('a paused replica: semaphore grants are retried within the wait and given back each time, then acquire fails; with it back, acquire works', async () => {
    const redis = await connect(masterPort);
    const admin = await connect(masterPort);
    const addr = await clientAddr(redis);
    const { locks } = locksOn(redis, { syncReplicas: { count: 2, timeoutMs: 100 } });
    const semaphore = locks.semaphore('paused', { permits: 3 });
    expect(await semaphore.availablePermits()).toBe(3);
    const [paused] = await cluster.replicas();
    paused!.pause();
    monitor = await monitorCommands(`redis://${LOOPBACK}:${masterPort}`);
    const started = performance.now();
    const error = await semaphore.acquire({ waitMs: 800 }).catch((caught: unknown) => caught);
    const elapsed = performance.now() - started;
    expect(error).toBeInstanceOf(ReplicationError);
    expect(error).toMatchObject({ acknowledged: 1, required: 2 });
    expect(elapsed).toBeGreaterThan(500);
    expect(elapsed).toBeLessThan(3_000);
    expect(await admin.get(semaphore.key)).toBe('3');
    const waits = commandsFrom(monitor.lines, { clientAddr: addr }).filter(
      (command) => command[0] === 'WAIT',
    );
    // Several tries, each followed by its WAIT.
    expect(waits.length).toBeGreaterThanOrEqual(3);

    paused!.resume();
    await semaphore.acquire({ waitMs: 5_000 });
    expect(await admin.get(semaphore.key)).toBe('2');
  });

  it('a latch count-down a frozen replica missed is applied once, resolves, and reports ReplicationError on error', async () => {
    const redis = await connect(masterPort);
    const admin = await connect(masterPort);
    const addr = await clientAddr(redis);
    const { locks, errors } = locksOn(redis, { syncReplicas: { count: 2, timeoutMs: 100 } });
    const latch = locks.countDownLatch('frozen');
    expect(await latch.trySetCount(3)).toBe(true);
    // Past script loading (a first EVALSHA is refused, then EVAL goes with a WAIT of its own).
    // A count-down of a latch that does not exist changes nothing: no shortfall to report.
    expect(await locks.countDownLatch('missing').countDown()).toBe(0);
    expect(errors).toEqual([]);
    const [paused, other] = await cluster.replicas();
    const replica = await connect(other!.port);
    paused!.pause();
    monitor = await monitorCommands(`redis://${LOOPBACK}:${masterPort}`);
    expect(await latch.countDown()).toBe(2);
    // Counted once, not undone, not retried: one script and its WAIT.
    expect(await admin.get(latch.key)).toBe('2');
    await monitor.waitFor((lines) => commandsFrom(lines, { clientAddr: addr }).length >= 2);
    expect(
      commandsFrom(monitor.lines, { clientAddr: addr }).map((command) =>
        command[0] === 'EVALSHA' ? 'script' : command.join(' '),
      ),
    ).toEqual(['script', 'WAIT 2 100']);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(ReplicationError);
    expect(errors[0]).toMatchObject({ code: 'NOT_REPLICATED', acknowledged: 1, required: 2 });
    expect(errors[0]?.message).toMatch(/Latch "frozen" was counted down/);
    // The replica that answered has it.
    expect(await replica.get(latch.key)).toBe('2');

    // A trySetCount that found a latch changed nothing: nothing to report. A delete did.
    expect(await latch.trySetCount(5)).toBe(false);
    expect(errors).toHaveLength(1);
    expect(await latch.delete()).toBe(true);
    expect(errors).toHaveLength(2);
    expect(errors[1]?.message).toMatch(/Latch "frozen" was deleted/);
    expect(await latch.count()).toBe(0);
  });

  it('a semaphore release and a permit semaphore count change too few replicas acknowledged are applied, resolve, and report ReplicationError on error', async () => {
    const redis = await connect(masterPort);
    const admin = await connect(masterPort);
    const { locks, errors } = locksOn(redis, { syncReplicas: { count: 3, timeoutMs: 100 } });
    const semaphore = locks.semaphore('released');
    await semaphore.release(2);
    await semaphore.addPermits(1);
    // Given, not taken back: a waiter may have them already.
    expect(await admin.get(semaphore.key)).toBe('3');
    expect(await semaphore.delete()).toBe(true);
    expect(await admin.exists(semaphore.key)).toBe(0);
    expect(errors).toHaveLength(3);
    for (const error of errors) {
      expect(error).toBeInstanceOf(ReplicationError);
      expect(error).toMatchObject({ code: 'NOT_REPLICATED', acknowledged: 2, required: 3 });
    }
    expect(errors[0]?.message).toMatch(/2 permits were added to semaphore "released"/);

    // A permit semaphore's count changes too: applied, resolved, reported.
    const permits = locks.permitSemaphore('permits-released');
    expect(await permits.trySetPermits(2)).toBe(true);
    expect(await permits.addPermits(1)).toBe(3);
    expect(await permits.trySetPermits(5)).toBe(false);
    expect(await permits.availablePermits()).toBe(3);
    expect(errors[2]?.message).toMatch(/Semaphore "released" was deleted but only 2 of the 3/);
    expect(errors.slice(3).map((error) => error.message)).toEqual([
      expect.stringMatching(/The permits of semaphore "permits-released" were set but only 2 of the 3/),
      expect.stringMatching(/1 permit was added to semaphore "permits-released" but only 2 of the 3/),
    ]);
  });
});
