import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LockClient, LockLostError, type Lease } from '../../src/index.js';
import { luaScripts } from '../../src/scripts/generated.js';
import { uniquePrefix } from '../support/keys.js';
import { clientAddr, commandsFrom } from '../support/monitor.js';
import { sharedRedis } from '../support/redis-server.js';
import { commandsOf } from '../support/clients.js';
import { testResources, type LockConnection, type Redis } from '../support/resources.js';
import { sleep, waitUntil } from '../support/wait.js';

const RENEW_SHA = luaScripts['lock/renew'].sha1;
const RELEASE_SHA = luaScripts['lock/release'].sha1;

interface TimedCommand {
  /** Server time of the command, in ms (from the MONITOR line). */
  readonly atMs: number;
  readonly args: string[];
}

/** The commands `addr` sent, in server order, with their server timestamps. */
function timedCommandsFrom(lines: readonly string[], addr: string): TimedCommand[] {
  const result: TimedCommand[] = [];
  for (const line of lines) {
    const args = commandsFrom([line], { clientAddr: addr })[0];
    if (args === undefined) continue;
    result.push({ atMs: Number.parseFloat(line.slice(0, line.indexOf(' '))) * 1_000, args });
  }
  return result;
}

function isScriptCall(args: readonly string[], sha: string): boolean {
  return args[0]?.toUpperCase() === 'EVALSHA' && args[1] === sha;
}

/** The keys of a renew call: `EVALSHA sha numkeys key... lease field...`. */
function renewKeys(args: readonly string[]): string[] {
  const count = Number(args[2]);
  return args.slice(3, 3 + count);
}

describe('watchdog', () => {
  let url: string;
  let redis: LockConnection;
  let observer: Redis;
  let addr: string;
  const perFile = testResources(() => url);
  const res = testResources(() => url);

  beforeAll(async () => {
    ({ url } = await sharedRedis());
    redis = await perFile.connectLocks();
    observer = await perFile.connect();
    addr = await clientAddr(commandsOf(redis));
  });

  afterEach(() => res.closeAll());

  afterAll(() => perFile.closeAll());

  /** All on the one connection `redis`, whose commands the tests count. */
  function lockClient(watchdogTimeoutMs: number, label: string): LockClient {
    return res.track(new LockClient(redis, { watchdogTimeoutMs, keyPrefix: uniquePrefix(label) }));
  }

  it('keeps a lock without leaseMs alive for many leases, and stops renewing it at release', async () => {
    // Each renewal call is given a third of the lease: 400 ms, which a busy machine's scheduler
    // does not eat up the way it does 100 ms.
    const watchdogTimeoutMs = 1_200;
    const locks = lockClient(watchdogTimeoutMs, 'wd-keep');
    const lock = locks.lock('report:daily');
    const commands = await res.monitor();

    const lease = await lock.acquire();
    const heldUntil = performance.now() + 4 * watchdogTimeoutMs;
    let minPttl = Number.POSITIVE_INFINITY;
    let samples = 0;
    while (performance.now() < heldUntil) {
      minPttl = Math.min(minPttl, await observer.pTTL(lock.key));
      samples += 1;
      await sleep(20);
    }
    // -2 (no key) or 0 would mean the lease lapsed at some point while the lock was held.
    expect(samples).toBeGreaterThan(10);
    expect(minPttl).toBeGreaterThan(0);
    expect(lease.signal.aborted).toBe(false);

    await lease.release();
    expect(await observer.exists(lock.key)).toBe(0);
    await sleep(3 * (watchdogTimeoutMs / 3) + 100);
    // Commands of one connection reach MONITOR in the order the server ran them, so a renewal
    // sent before the release shows up before it and one sent after shows up after it.
    await commands.waitFor((lines) =>
      timedCommandsFrom(lines, addr).some((c) => isScriptCall(c.args, RELEASE_SHA)),
    );
    const sent = timedCommandsFrom(commands.lines, addr).map((c) => c.args);
    const releaseAt = sent.findIndex((args) => isScriptCall(args, RELEASE_SHA));
    const renewsBefore = sent.slice(0, releaseAt).filter((args) => isScriptCall(args, RENEW_SHA));
    const renewsAfter = sent.slice(releaseAt + 1).filter((args) => isScriptCall(args, RENEW_SHA));
    // About one renewal per third of the lease over four leases.
    expect(renewsBefore.length).toBeGreaterThanOrEqual(5);
    expect(renewsBefore.every((args) => renewKeys(args).includes(lock.key))).toBe(true);
    expect(renewsAfter).toEqual([]);
  });

  it('takes a renewal reply that came in while its event loop was blocked past the call timeout', async () => {
    // Renewed every second, each renewal call given a second; a hold is known held until a
    // lease after the send of its last confirmed renewal.
    const watchdogTimeoutMs = 3_000;
    const intervalMs = watchdogTimeoutMs / 3;
    // Past the renewal call's timeout, and well short of the lease left when it began.
    const blockMs = intervalMs + 150;
    const client = await res.connect();
    const locks = res.track(
      new LockClient(client, { watchdogTimeoutMs, keyPrefix: uniquePrefix('wd-blocked') }),
    );
    const failed: string[] = [];
    locks.on('renewFailed', (event) => failed.push(event.error.message));
    const lease = await locks.lock('ledger:close').acquire();

    // Right after node-redis has written the next renewal out (its write runs in an immediate
    // queued before this one), the event loop is blocked: Redis answers meanwhile, and when the
    // loop runs again the renewal's timeout is long due and its reply waits unread.
    const send = client.sendCommand.bind(client);
    let blocked: { readonly sentAt: number; readonly endedAt: number } | undefined;
    let armed = true;
    client.sendCommand = ((...args: Parameters<typeof send>) => {
      const reply = send(...args);
      if (armed && isScriptCall(args[0] as string[], RENEW_SHA)) {
        armed = false;
        const sentAt = performance.now();
        setImmediate(() => {
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, blockMs);
          blocked = { sentAt, endedAt: performance.now() };
        });
      }
      return reply;
    }) as typeof send;
    await waitUntil(
      'a renewal was sent and the event loop blocked after it',
      () => blocked !== undefined,
      5_000,
    );
    await sleep(intervalMs);

    // The block ended before the hold's deadline (a lease after the previous renewal, at most an
    // interval before this one): the hold was valid throughout, and its renewal was answered.
    const blockedFor = (blocked?.endedAt ?? 0) - (blocked?.sentAt ?? 0);
    expect(blockedFor).toBeGreaterThanOrEqual(blockMs);
    expect(blockedFor).toBeLessThan(watchdogTimeoutMs - intervalMs);
    expect(failed).toEqual([]);
    expect(lease.signal.aborted).toBe(false);
    // The blocked renewal (or a later one) set the lease anew: it lasts a lease from its send.
    // Redis counts whole milliseconds on its own clock: up to 2 ms of rounding either way.
    const pttl = await observer.pTTL(lease.key);
    const sinceSent = performance.now() - (blocked?.sentAt ?? 0);
    expect(pttl).toBeGreaterThanOrEqual(Math.floor(watchdogTimeoutMs - sinceSent) - 2);
    await lease.release();
  });

  it('never renews a lock taken with leaseMs, which then expires', async () => {
    const locks = lockClient(300, 'wd-lease');
    const lock = locks.lock('coupon:spring');
    const commands = await res.monitor();
    const lost: LockLostError[] = [];
    locks.on('lockLost', (event) => lost.push(event.error));

    const acquiredAt = performance.now();
    const lease = await lock.acquire({ leaseMs: 400 });
    const pttl = await observer.pTTL(lock.key);
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(400);

    await sleep(Math.max(0, acquiredAt + 200 - performance.now()));
    expect(lease.signal.aborted).toBe(false);
    expect(await observer.exists(lock.key)).toBe(1);

    // Well past the lease and three watchdog intervals of the client.
    await sleep(Math.max(0, acquiredAt + 700 - performance.now()));
    expect(await observer.exists(lock.key)).toBe(0);
    expect(lease.signal.aborted).toBe(true);
    const reason: unknown = lease.signal.reason;
    expect(reason).toBeInstanceOf(LockLostError);
    expect((reason as LockLostError).code).toBe('LOCK_LOST');
    expect((reason as LockLostError).reason).toBe('expired');
    expect(lost).toEqual([reason]);

    const renews = timedCommandsFrom(commands.lines, addr).filter((c) => isScriptCall(c.args, RENEW_SHA));
    expect(renews).toEqual([]);
  });

  it('renews 1,000 held locks in one call per interval', async () => {
    // Each renewal call is given an interval: on a busy machine a call of 1,000 keys, watched by
    // MONITOR, takes a good part of one, and a lease of three leaves room for a retry.
    const watchdogTimeoutMs = 3_000;
    const intervalMs = watchdogTimeoutMs / 3;
    const count = 1_000;
    const locks = lockClient(watchdogTimeoutMs, 'wd-many');
    const names = Array.from({ length: count }, (_, i) => `order:${i}`);
    const leases: Lease[] = [];
    for (let i = 0; i < count; i += 100) {
      leases.push(...(await Promise.all(names.slice(i, i + 100).map((name) => locks.lock(name).acquire()))));
    }
    const keys = leases.map((lease) => lease.key);
    expect(new Set(keys).size).toBe(count);

    const commands = await res.monitor();
    const watchStartedAt = performance.now();
    await sleep(4 * intervalMs + 100);
    const pttls = await Promise.all(keys.map((key) => observer.pTTL(key)));
    const watchedMs = performance.now() - watchStartedAt;
    await commands.stop();

    expect(Math.min(...pttls)).toBeGreaterThan(0);
    expect(leases.every((lease) => !lease.signal.aborted)).toBe(true);

    const renews = timedCommandsFrom(commands.lines, addr).filter((c) => isScriptCall(c.args, RENEW_SHA));
    // Group the calls into rounds: the batches of one round go out together.
    const rounds: TimedCommand[][] = [];
    for (const call of renews) {
      const round = rounds.at(-1);
      const last = round?.at(-1);
      if (round !== undefined && last !== undefined && call.atMs - last.atMs < intervalMs / 2)
        round.push(call);
      else rounds.push([call]);
    }
    const intervals = Math.floor(watchedMs / intervalMs) + 1;
    expect(rounds.length).toBeGreaterThanOrEqual(3);
    expect(rounds.length).toBeLessThanOrEqual(intervals);
    expect(renews.length).toBeLessThanOrEqual(intervals);
    for (const round of rounds) {
      expect(round).toHaveLength(1);
    }
    // Every full round covers every held lock. The first one seen may have been sent while the
    // last locks were still being taken (it reaches MONITOR after the watch began), and the last
    // may be cut off by the end of the watch.
    for (const round of rounds.slice(1, -1)) {
      expect(new Set(round.flatMap((call) => renewKeys(call.args))).size).toBe(count);
    }
  });
});
