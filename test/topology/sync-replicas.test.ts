/**
 * `syncReplicas` against a real master with two replicas: the WAIT goes out right behind each
 * write that grants, too few acknowledgements roll the grant back, and enough make the grant
 * readable on the replicas by the time acquire resolves.
 */
import { Redis } from 'ioredis';
import { createClient, type RedisClientType } from 'redis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  InvalidArgumentError,
  LockClient,
  ReplicationError,
  type LockClientOptions,
} from '../../src/index.js';
import { commandsFrom, monitorCommands, clientAddr, type CommandMonitor } from '../support/monitor.js';
import { startReplicated, type Replicated } from '../support/replication.js';

const LOOPBACK = '127.0.0.1';

describe('syncReplicas', () => {
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

  function locksOn(
    redis: ConstructorParameters<typeof LockClient>[0],
    options: LockClientOptions,
  ): LockClient {
    const locks = new LockClient(redis, { keyPrefix: `sync:${lockClients.length}:`, ...options });
    locks.on('error', () => undefined);
    lockClients.push(locks);
    return locks;
  }

  beforeAll(async () => {
    cluster = await startReplicated();
    masterPort = await cluster.masterPort();
  }, 60_000);

  afterEach(async () => {
    await Promise.all(lockClients.splice(0).map((locks) => locks.close()));
    await monitor?.stop();
    monitor = undefined;
    for (const replica of cluster.nodes) replica.resume();
  });

  afterAll(async () => {
    await Promise.all(clients.splice(0).map((client) => client.close().catch(() => undefined)));
    await cluster?.stop();
  });

  it('sends WAIT right behind every acquire and release, on the same connection, before the script replies', async () => {
    const redis = await connect(masterPort);
    const addr = await clientAddr(redis);
    // What the client library is asked to send, and when replies come back, in order.
    const events: string[] = [];
    const original = redis.sendCommand.bind(redis);
    (redis as unknown as { sendCommand: typeof redis.sendCommand }).sendCommand = ((
      args: string[],
      options?: object,
    ) => {
      const name = String(args[0]);
      events.push(`send ${name}`);
      const reply = original(args, options);
      reply.then(
        () => events.push(`reply ${name}`),
        () => events.push(`fail ${name}`),
      );
      return reply;
    }) as typeof redis.sendCommand;
    const locks = locksOn(redis, { syncReplicas: { count: 2, timeoutMs: 500 } });
    // Past the first acquire: the server check (INFO server), INFO persistence, script loading.
    await (await locks.lock('warm').acquire()).release();

    monitor = await monitorCommands(`redis://${LOOPBACK}:${masterPort}`);
    events.length = 0;
    const lease = await locks.lock('a').acquire();
    await lease.release();
    await monitor.waitFor((lines) => commandsFrom(lines, { clientAddr: addr }).length >= 4);
    const sent = commandsFrom(monitor.lines, { clientAddr: addr }).map((command) =>
      command.slice(0, 3).join(' '),
    );
    expect(sent).toEqual([
      expect.stringMatching(/^EVALSHA /),
      'WAIT 2 500',
      expect.stringMatching(/^EVALSHA /),
      'WAIT 2 500',
    ]);
    // One round trip each: WAIT is handed to the library before the script's reply is in.
    expect(events).toEqual([
      'send EVALSHA',
      'send WAIT',
      'reply EVALSHA',
      'reply WAIT',
      'send EVALSHA',
      'send WAIT',
      'reply EVALSHA',
      'reply WAIT',
    ]);
  });

  it('with ioredis too: WAIT right behind each script, on its connection', async () => {
    const redis = new Redis({ host: LOOPBACK, port: masterPort });
    redis.on('error', () => undefined);
    try {
      const addr = await clientAddr({ sendCommand: (args) => redis.call(args[0] ?? '', ...args.slice(1)) });
      const locks = locksOn(redis, { syncReplicas: { count: 2, timeoutMs: 500 } });
      await (await locks.lock('warm').acquire()).release();
      monitor = await monitorCommands(`redis://${LOOPBACK}:${masterPort}`);
      const lease = await locks.lock('io').acquire();
      await lease.release();
      await monitor.waitFor((lines) => commandsFrom(lines, { clientAddr: addr }).length >= 4);
      const sent = commandsFrom(monitor.lines, { clientAddr: addr }).map((command) =>
        command.slice(0, 3).join(' '),
      );
      expect(sent).toEqual([
        expect.stringMatching(/^EVALSHA /),
        'WAIT 2 500',
        expect.stringMatching(/^EVALSHA /),
        'WAIT 2 500',
      ]);
    } finally {
      await Promise.all(lockClients.splice(0).map((locks) => locks.close()));
      redis.disconnect();
    }
  });

  it('a grant acknowledged by all the replicas asked for is on them when acquire resolves', async () => {
    const redis = await connect(masterPort);
    const locks = locksOn(redis, { syncReplicas: { count: 2, timeoutMs: 1_000 } });
    const replicas = await Promise.all((await cluster.replicas()).map((node) => connect(node.port)));
    expect(replicas).toHaveLength(2);
    for (let i = 0; i < 20; i += 1) {
      const lease = await locks.lock(`on-replicas-${i}`).acquire();
      // Read at once, without waiting: WAIT already made sure.
      for (const replica of replicas) expect(await replica.exists(lease.key)).toBe(1);
      await lease.release();
    }
  });

  it('more replicas asked for than exist: the grant is rolled back and acquire rejects with ReplicationError', async () => {
    const redis = await connect(masterPort);
    const admin = await connect(masterPort);
    const locks = locksOn(redis, { syncReplicas: { count: 3, timeoutMs: 100 } });
    for (const lock of [
      locks.lock('too-many'),
      locks.fencedLock('too-many-fenced'),
      locks.fairLock('too-many-fair'),
    ]) {
      const error = await lock.acquire({ waitMs: 0 }).catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(ReplicationError);
      expect(error).toMatchObject({ code: 'NOT_REPLICATED', acknowledged: 2, required: 3 });
      // Nothing is left held: the lock key is gone (the rollback ran before the rejection).
      expect(await admin.exists(lock.key)).toBe(0);
    }
  });

  it('a paused replica: grants are retried within the wait, rolled back each time, then the acquire fails', async () => {
    const redis = await connect(masterPort);
    const admin = await connect(masterPort);
    const addr = await clientAddr(redis);
    const locks = locksOn(redis, { syncReplicas: { count: 2, timeoutMs: 100 } });
    await (await locks.lock('warm').acquire()).release();
    const [paused] = await cluster.replicas();
    paused!.pause();
    monitor = await monitorCommands(`redis://${LOOPBACK}:${masterPort}`);
    const started = performance.now();
    const error = await locks
      .lock('paused')
      .acquire({ waitMs: 800 })
      .catch((caught: unknown) => caught);
    const elapsed = performance.now() - started;
    expect(error).toBeInstanceOf(ReplicationError);
    expect(error).toMatchObject({ acknowledged: 1, required: 2 });
    expect(elapsed).toBeGreaterThan(500);
    expect(elapsed).toBeLessThan(3_000);
    expect(await admin.exists(locks.lock('paused').key)).toBe(0);
    const waits = commandsFrom(monitor.lines, { clientAddr: addr }).filter(
      (command) => command[0] === 'WAIT',
    );
    // Several tries, each followed by its WAIT.
    expect(waits.length).toBeGreaterThanOrEqual(3);

    // With the replica back, the same acquire goes through.
    paused!.resume();
    const lease = await locks.lock('paused').acquire({ waitMs: 5_000 });
    expect(await admin.exists(lease.key)).toBe(1);
    await lease.release();
  });

  it('a renewal too few replicas acknowledged is not counted: renewFailed, then the hold expires', async () => {
    const redis = await connect(masterPort);
    // Renewed every second: a renewal runs after the pause and before the lease ends even when
    // a busy machine stalls this process for most of a second (at 600 ms, a stall of 400 ms
    // let the lease end with no renewal tried, seen at load 9).
    const leaseMs = 3_000;
    const locks = locksOn(redis, { watchdogTimeoutMs: leaseMs, syncReplicas: { count: 2, timeoutMs: 100 } });
    const failed: unknown[] = [];
    const lost: unknown[] = [];
    locks.on('renewFailed', (event) => failed.push(event.error));
    locks.on('lockLost', (event) => lost.push(event.error));
    const lease = await locks.lock('renewed').acquire();
    const [paused] = await cluster.replicas();
    paused!.pause();
    // From now on each renewal has one acknowledgement of the two it needs.
    await expect
      .poll(() => failed.some((error) => error instanceof ReplicationError), { timeout: 2 * leaseMs })
      .toBe(true);
    await expect.poll(() => lost.length, { timeout: 2 * leaseMs }).toBe(1);
    expect(lost[0]).toMatchObject({ reason: 'expired' });
    expect(lease.signal.aborted).toBe(true);
  });

  it('with AOF on, WAITAOF is sent behind a grant; a server that refuses it (before 7.2) gets WAIT from then on', async () => {
    const admin = await connect(masterPort);
    const info = await admin.sendCommand<string>(['INFO', 'server']);
    const version = /redis_version:(\d+)\.(\d+)/.exec(info);
    const before72 = Number(version?.[1]) < 7 || (Number(version?.[1]) === 7 && Number(version?.[2]) < 2);
    await admin.sendCommand(['CONFIG', 'SET', 'appendonly', 'yes']);
    try {
      const redis = await connect(masterPort);
      const addr = await clientAddr(redis);
      const locks = locksOn(redis, { syncReplicas: { count: 2, timeoutMs: 500 } });
      monitor = await monitorCommands(`redis://${LOOPBACK}:${masterPort}`);
      const lease = await locks.lock('aof').acquire({ waitMs: 3_000 });
      await lease.release();
      // Both waits (the acquire's that went through, the release's) are in.
      await monitor.waitFor(
        (lines) =>
          commandsFrom(lines, { clientAddr: addr }).filter(
            (command) => command[0]?.startsWith('WAIT') === true,
          ).length >= 2,
      );
      // The client's one PUBSUB NUMSUB (round-trips.test.ts) goes out beside its first calls.
      const sent = commandsFrom(monitor.lines, { clientAddr: addr })
        .filter((command) => command[0] !== 'PUBSUB')
        .map((command) => (command[0] === 'EVALSHA' || command[0] === 'EVAL' ? 'script' : command.join(' ')));
      expect(sent.slice(0, 2)).toEqual(['INFO server', 'INFO persistence']);
      if (before72) {
        // MONITOR does not show a command the server does not know: the WAITAOF behind the first
        // grant is missing, that grant was rolled back (a second script), and the retry (a
        // third) waited with WAIT, as did the release. (A script not cached yet shows twice.)
        const firstWait = sent.indexOf('WAIT 2 500');
        expect(firstWait).toBeGreaterThan(0);
        expect(sent.slice(2, firstWait).every((command) => command === 'script')).toBe(true);
        expect(firstWait - 2).toBeGreaterThanOrEqual(3);
        expect(
          sent.slice(firstWait).filter((command) => command.startsWith('WAIT')).length,
        ).toBeGreaterThanOrEqual(2);
      } else {
        expect(sent).toContain('WAITAOF 0 2 500');
      }
    } finally {
      await admin.sendCommand(['CONFIG', 'SET', 'appendonly', 'no']);
    }
  });

  it('rejects bad syncReplicas before sending anything', async () => {
    const redis = await connect(masterPort);
    const addr = await clientAddr(redis);
    monitor = await monitorCommands(`redis://${LOOPBACK}:${masterPort}`);
    const bad: unknown[] = [
      null,
      1,
      {},
      { count: 1 },
      { timeoutMs: 100 },
      { count: 0, timeoutMs: 100 },
      { count: 1.5, timeoutMs: 100 },
      { count: '1', timeoutMs: 100 },
      { count: 101, timeoutMs: 100 },
      { count: 1, timeoutMs: 0 },
      { count: 1, timeoutMs: -5 },
      { count: 1, timeoutMs: 10.5 },
      { count: 1, timeoutMs: Number.POSITIVE_INFINITY },
      // Above a quarter of the default 30 s watchdog lease.
      { count: 1, timeoutMs: 7_501 },
      { count: 1, timeoutMs: 100, extra: true },
    ];
    for (const syncReplicas of bad) {
      expect(() => new LockClient(redis, { syncReplicas } as unknown as LockClientOptions)).toThrow(
        InvalidArgumentError,
      );
    }
    expect(
      () => new LockClient(redis, { watchdogTimeoutMs: 400, syncReplicas: { count: 1, timeoutMs: 101 } }),
    ).toThrow(/from 1 to 100/);
    // Accepted: the bounds themselves.
    locksOn(redis, { syncReplicas: { count: 100, timeoutMs: 7_500 } });
    await redis.ping();
    await monitor.waitFor((lines) => commandsFrom(lines, { clientAddr: addr }).length >= 1);
    expect(commandsFrom(monitor.lines, { clientAddr: addr }).map((command) => command[0])).toEqual(['PING']);
  });
});
