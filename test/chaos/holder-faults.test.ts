/**
 * Faults of the lock holder's process, each against a redis-server of its own, with the holder
 * and a waiter as real Node processes, for every kind of lock (test/support/kinds.ts):
 *   - frozen (SIGSTOP) for three leases: a waiter takes over as soon as the lease runs out; the
 *     thawed holder learns of the loss from its own clock, before any renewal reply, and its
 *     release leaves the new holder's lock alone;
 *   - frozen for half a lease: nothing is lost and nobody else gets the lock;
 *   - its event loop blocked for two leases: as when frozen;
 *   - killed (SIGKILL): a waiter takes over within a lease and a second, and the dead process
 *     leaves no connection and no unlock-channel subscription behind.
 * For the fenced lock, each later holder's token is also larger than the one before.
 * Times are monotonic nanosecond stamps, comparable across the processes of the machine.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { WorkerMessage, Worker } from '../support/child.js';
import { KINDS, type Kind, type LockSnapshot } from '../support/kinds.js';
import { uniquePrefix } from '../support/keys.js';
import { msBetween, now, ofType, stamp } from '../support/stamps.js';
import { freeze } from '../support/freeze.js';
import { startRedis, type RedisInstance } from '../support/redis-server.js';
import { testResources, type Redis } from '../support/resources.js';
import { sleep, waitUntil } from '../support/wait.js';
import { scaled } from './scale.js';

const PROCESS = new URL('./fixtures/holder-process.ts', import.meta.url).pathname;
const LEASE_MS = scaled(1_000, 1_500);
const RENEW_MS = LEASE_MS / 3;
/**
 * How late after the server-side expiry a parked waiter may take over. The same for every kind:
 * a waiter of each kind wakes by itself when the PTTL it last read runs out, and a simple-lock
 * waiter, which re-reads the PTTL at least every 250 ms, only learns the expiry more exactly.
 */
const TAKEOVER_SLACK_MS = 200;
/** Redis expires keys by its own (wall) clock; allow for its millisecond rounding. */
const EXPIRY_CLOCK_SLACK_MS = 2;
// Child processes start through tsx, which on a busy machine (load average 20 on two cores)
// takes more than 20 s. Not a timing under test: only a bound on a hung start.
const STARTUP_MS = 60_000;
const LOCK_NAME = 'payroll:close';
const HOLDER_NAME = 'chaos-holder';
const WAITER_NAME = 'chaos-waiter';
const MS = 1_000_000n;
const RENEW_NS = BigInt(Math.round(RENEW_MS * 1e6));

/** A test's timeout: its own run time, plus room for slow worker starts on a loaded machine. */
function budget(scenarioMs: number): number {
  return 2 * STARTUP_MS + scenarioMs;
}

function all(worker: Worker, type: string): WorkerMessage[] {
  return worker.messages.filter(ofType(type));
}

async function sleepUntil(at: bigint): Promise<void> {
  const left = at - now();
  if (left > 0n) await sleep(Number(left / MS) + 1);
}

/**
 * The earliest the holder's lock can expire in Redis: a lease after the send of the latest
 * renewal Redis confirmed, or after `acquireSentBefore` if none was.
 */
function earliestExpiry(holder: Worker, acquireSentBefore: bigint): bigint {
  const confirmed = new Set(
    all(holder, 'renew-reply')
      .filter((msg) => Array.isArray(msg['renewed']) && msg['renewed'].every((flag) => flag === 1))
      .map((msg) => msg['id']),
  );
  const sends = all(holder, 'renew-sent')
    .filter((msg) => confirmed.has(msg['id']))
    .map((msg) => stamp(msg));
  const base = sends.reduce((latest, sent) => (sent > latest ? sent : latest), acquireSentBefore);
  return base + BigInt(LEASE_MS) * MS;
}

/**
 * When the lock expires if the last renewal sent before `faultFrom` took effect the moment it
 * was sent (it may have, unconfirmed): for figures, not bounds.
 */
function expiryAfterLastSend(holder: Worker, faultFrom: bigint): bigint {
  const sends = all(holder, 'renew-sent')
    .map((msg) => stamp(msg))
    .filter((sent) => sent <= faultFrom);
  return (sends.at(-1) ?? 0n) + BigInt(LEASE_MS) * MS;
}

/** For the fenced lock: the later holder's token is larger than the earlier holder's. */
function expectLaterToken(kind: Kind, earlier: WorkerMessage, later: WorkerMessage): void {
  if (!kind.fenced) return;
  expect(typeof earlier['token']).toBe('string');
  expect(typeof later['token']).toBe('string');
  expect(BigInt(String(later['token']))).toBeGreaterThan(BigInt(String(earlier['token'])));
}

interface ClientInfo {
  readonly name: string;
  readonly sub: number;
}

async function clientList(redis: Redis): Promise<ClientInfo[]> {
  const reply = await redis.sendCommand<unknown>(['CLIENT', 'LIST']);
  return String(reply)
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const fields = new Map(
        line
          .trim()
          .split(' ')
          .map((pair) => {
            const at = pair.indexOf('=');
            return [pair.slice(0, at), pair.slice(at + 1)] as const;
          }),
      );
      return { name: fields.get('name') ?? '', sub: Number(fields.get('sub') ?? '0') };
    });
}

// A waiter that takes over from a stalled holder: a read lock lets a second reader straight in,
// so it is left out (test/chaos/read-write-lock-faults.test.ts stalls readers beside a writer).
describe.each(KINDS.filter((kind) => kind.exclusive))('faults of the lock holder process: $name', (kind) => {
  let server: RedisInstance;
  let observer: Redis;
  const res = testResources(() => server.url);

  beforeEach(async () => {
    server = await startRedis();
    observer = await res.connect();
  });

  afterEach(async () => {
    await res.closeAll();
    // Unset when beforeEach could not start a server; its own error says why.
    await server?.stop();
  });

  function spawn(clientName: string, keyPrefix: string): Worker {
    return res.worker(PROCESS, {
      REDIS_URL: server.url,
      KEY_PREFIX: keyPrefix,
      KIND: kind.name,
      LOCK_NAME,
      WATCHDOG_MS: String(LEASE_MS),
      // Long enough that a subscription outlives every check of a test.
      LINGER_MS: '60000',
      CLIENT_NAME: clientName,
    });
  }

  /** The lock without its owners (secret), as the observer reads it. */
  function lockState(key: string): Promise<LockSnapshot> {
    return kind.inspect(observer, key);
  }

  /** A holder with the lock, and a waiter in another process parked on its unlock channel. */
  async function holderAndWaiter(label: string): Promise<{
    holder: Worker;
    waiter: Worker;
    key: string;
    held: WorkerMessage;
    acquireSentBefore: bigint;
  }> {
    const keyPrefix = uniquePrefix(label);
    const holder = spawn(HOLDER_NAME, keyPrefix);
    const waiter = spawn(WAITER_NAME, keyPrefix);
    await Promise.all([holder, waiter].map((w) => w.next(ofType('ready'), STARTUP_MS)));

    holder.send({ type: 'acquire' });
    const acquireSentBefore = stamp(await holder.next(ofType('waiting')));
    const held = await holder.next(ofType('acquired'));
    const key = String(held['key']);

    // A fixed lease for the waiter: nothing renews its lock, so its PTTL can only go down
    // unless someone else raises it.
    waiter.send({ type: 'acquire', leaseMs: 60_000 });
    await waiter.next(ofType('waiting'));
    await waitUntil(
      'the waiter subscribed to the unlock channel',
      async () => (await res.numsub(kind.channel(key))) >= 1,
      10_000,
    );
    // The lease at fault time is a renewed one, and the fault lands anywhere in the renewal
    // cycle.
    await holder.next(ofType('renew-reply'), 2 * LEASE_MS);
    await sleep(Math.random() * RENEW_MS);
    return { holder, waiter, key, held, acquireSentBefore };
  }

  /**
   * After the holder resumed at `resumedAt` (its own stamp or the parent's): its signal aborted
   * with reason 'expired' within a renewal interval, and it neither sent a renewal before that
   * nor took a reply to any renewal it sent after the fault began at `faultFrom`.
   */
  async function expectLossByOwnClock(
    holder: Worker,
    faultFrom: bigint,
    resumedAt: bigint,
  ): Promise<{ abortAfterResumeMs: number; staleReplies: number }> {
    const abort = await holder.next(ofType('abort'), 5_000);
    const abortedAt = stamp(abort);
    expect(abort['reason']).toBe('expired');
    expect(abortedAt).toBeGreaterThan(resumedAt);
    const abortAfterResumeMs = msBetween(resumedAt, abortedAt);
    expect(abortAfterResumeMs).toBeLessThanOrEqual(RENEW_MS);

    const lost = await holder.next(ofType('lockLost'), 1_000);
    expect(lost['reason']).toBe('expired');
    expect(stamp(lost)).toBeGreaterThanOrEqual(abortedAt);
    expect(all(holder, 'renewFailed').map((msg) => msg['message'])).toEqual([]);

    // The loss was declared by the clock alone: no renewal went out after the fault...
    const sentAfterFault = all(holder, 'renew-sent').filter((msg) => stamp(msg) > faultFrom);
    const sentBeforeAbort = sentAfterFault.filter((msg) => stamp(msg) < abortedAt);
    expect(
      sentBeforeAbort.map(
        (msg) =>
          `renewal ${String(msg['id'])} ${msBetween(resumedAt, stamp(msg)).toFixed(3)} ms after the thaw`,
      ),
      `renewals sent before the abort, which came ${msBetween(resumedAt, abortedAt).toFixed(3)} ms after the thaw`,
    ).toEqual([]);
    // ...and a reply that reached it first can only be for one already on its way then.
    const sentBefore = new Set(
      all(holder, 'renew-sent')
        .filter((msg) => stamp(msg) <= faultFrom)
        .map((msg) => msg['id']),
    );
    const repliesBeforeAbort = all(holder, 'renew-reply').filter(
      (msg) => stamp(msg) > resumedAt && stamp(msg) < abortedAt,
    );
    expect(repliesBeforeAbort.filter((msg) => !sentBefore.has(msg['id']))).toHaveLength(0);
    return { abortAfterResumeMs, staleReplies: repliesBeforeAbort.length };
  }

  /** The lost holder's release is refused and leaves the new holder's lock as it was. */
  async function expectReleaseRefused(holder: Worker, key: string, atTakeover: LockSnapshot): Promise<void> {
    const before = await lockState(key);
    holder.send({ type: 'release' });
    const result = await holder.next(ofType('release-result'), 5_000);
    expect(result['ok']).toBe(false);
    expect(result['error']).toBe('LockNotOwnedError');
    expect(result['code']).toBe('NOT_OWNER');
    const after = await lockState(key);
    expect(after.type).toBe(kind.keyType);
    expect(after.owners).toBe(1);
    expect(after.digest).toBe(before.digest);
    expect(after.digest).toBe(atTakeover.digest);
    expect(after.pttl).toBeGreaterThan(0);
    expect(after.pttl).toBeLessThanOrEqual(before.pttl);
    expect(after.pttl).toBeLessThanOrEqual(atTakeover.pttl);

    // Renewal stopped with the loss: nothing more goes out in the next interval either.
    const sentSoFar = all(holder, 'renew-sent').length;
    await sleep(RENEW_MS + 50);
    expect(all(holder, 'renew-sent')).toHaveLength(sentSoFar);
    expect((await lockState(key)).digest).toBe(atTakeover.digest);
  }

  it(
    'frozen (SIGSTOP) for three leases: a waiter takes over, the thawed holder aborts by its own clock',
    async ({ annotate }) => {
      const { holder, waiter, key, held, acquireSentBefore } = await holderAndWaiter('stop-long');

      const pauseFrom = now();
      // Stamped once Linux reports the holder stopped: it ran nothing after this until SIGCONT.
      const pausedBy = await freeze(holder.pid);
      const taken = await waiter.next(ofType('acquired'), LEASE_MS + 5_000);
      const takenAt = stamp(taken, 'at');
      const atTakeover = await lockState(key);
      expect(atTakeover.owners).toBe(1);
      expectLaterToken(kind, held, taken);

      const takeoverMs = msBetween(pauseFrom, takenAt);
      // The waiter's expiry bound fires late by as much as its event loop was held up.
      expect(takeoverMs).toBeLessThanOrEqual(LEASE_MS + TAKEOVER_SLACK_MS + Number(taken['loopDelayMaxMs']));
      // Never while the holder's last confirmed lease could still run in Redis.
      const expiry = earliestExpiry(holder, acquireSentBefore);
      expect(takenAt).toBeGreaterThanOrEqual(expiry - BigInt(EXPIRY_CLOCK_SLACK_MS) * MS);

      await sleepUntil(pauseFrom + BigInt(3 * LEASE_MS) * MS);
      expect(all(holder, 'abort')).toHaveLength(0);
      const resumedAt = now();
      holder.kill('SIGCONT');

      const { abortAfterResumeMs, staleReplies } = await expectLossByOwnClock(holder, pausedBy, resumedAt);
      await expectReleaseRefused(holder, key, atTakeover);
      expect(all(waiter, 'abort')).toHaveLength(0);
      await annotate(
        `lease ${LEASE_MS} ms: takeover ${takeoverMs.toFixed(1)} ms after SIGSTOP, ` +
          `${msBetween(expiry, takenAt).toFixed(1)} ms after the earliest expiry ` +
          `(${msBetween(expiryAfterLastSend(holder, pausedBy), takenAt).toFixed(1)} ms after the last renewal sent + lease); ` +
          `abort ${abortAfterResumeMs.toFixed(1)} ms after SIGCONT; ` +
          `replies to pre-pause renewals before the abort: ${staleReplies}`,
      );
    },
    budget(10 * LEASE_MS),
  );

  it(
    'frozen for half a lease: keeps the lock, and nobody else gets it meanwhile',
    async ({ annotate }) => {
      const { holder, waiter, key, held, acquireSentBefore } = await holderAndWaiter('stop-short');

      const pauseFrom = now();
      holder.kill('SIGSTOP');
      // Redis still holds it for the frozen holder.
      const frozenState = await lockState(key);
      expect(frozenState.owners).toBe(1);
      expect(frozenState.pttl).toBeGreaterThan(0);
      // Half a lease, and thawed no later than a renewal interval before the lock can first
      // expire, by the renewals the holder had confirmed: time for it to wake and renew. On a
      // busy machine this process runs late too; how late, it measures.
      const expiry = earliestExpiry(holder, acquireSentBefore);
      const resumeBy = pauseFrom + BigInt(LEASE_MS / 2) * MS;
      const plannedResume = expiry - RENEW_NS < resumeBy ? expiry - RENEW_NS : resumeBy;
      await sleepUntil(plannedResume);
      const resumedAt = now();
      holder.kill('SIGCONT');
      const leftAtResumeMs = msBetween(resumedAt, expiry);
      if (leftAtResumeMs < RENEW_MS / 2) {
        // Thawed so late (this process was held up) that the holder may not renew in time: a
        // loss is then its own clock's, and nothing else is judged.
        const outcome = await holder.next(
          (msg) => msg['type'] === 'abort' || (msg['type'] === 'renew-reply' && stamp(msg) > resumedAt),
          LEASE_MS + 5_000,
        );
        if (outcome['type'] === 'abort') expect(outcome['reason']).toBe('expired');
        await annotate(
          `thawed ${msBetween(plannedResume, resumedAt).toFixed(1)} ms late, ${leftAtResumeMs.toFixed(1)} ms ` +
            `before the earliest expiry: ${String(outcome['type'])}`,
        );
        return;
      }

      // The overdue renewal goes out at once and is confirmed.
      const renewed = await holder.next(
        (msg) =>
          msg['type'] === 'renew-reply' &&
          stamp(msg) > resumedAt &&
          Array.isArray(msg['renewed']) &&
          msg['renewed'][0] === 1,
        LEASE_MS,
      );
      const renewedAfterMs = msBetween(resumedAt, stamp(renewed));
      // Watch through a whole lease of renewals after the pause.
      await sleep(LEASE_MS);
      expect(all(holder, 'abort')).toHaveLength(0);
      expect(all(holder, 'lockLost')).toHaveLength(0);
      expect(all(holder, 'renewFailed').map((msg) => msg['message'])).toEqual([]);
      expect(all(waiter, 'acquired')).toHaveLength(0);
      const state = await lockState(key);
      expect(state.digest).toBe(frozenState.digest);
      expect(state.pttl).toBeGreaterThan(0);
      const gapMs = msBetween(
        stamp(
          all(holder, 'renew-reply')
            .filter((msg) => stamp(msg) < pauseFrom)
            .at(-1) ?? renewed,
        ),
        stamp(renewed),
      );

      // Still a working lock: the release goes through and hands it to the waiter.
      const releasedFrom = now();
      holder.send({ type: 'release' });
      expect(await holder.next(ofType('release-result'))).toMatchObject({ ok: true });
      if (kind.handsOver) {
        // The release itself gave the lock to the queued waiter, so it was never free. The
        // simple lock has no queue: its release frees the lock and announces it.
        const handed = await lockState(key);
        expect(handed.owners).toBe(1);
        expect(handed.digest).not.toBe(frozenState.digest);
      }
      const taken = await waiter.next(ofType('acquired'), 5_000);
      expect(stamp(taken, 'at')).toBeGreaterThan(releasedFrom);
      expectLaterToken(kind, held, taken);
      expect(all(holder, 'abort')).toHaveLength(0);
      await annotate(
        `lease ${LEASE_MS} ms: frozen ${msBetween(pauseFrom, resumedAt).toFixed(1)} ms, thawed ` +
          `${leftAtResumeMs.toFixed(1)} ms before the earliest expiry; ` +
          `renewal confirmed ${renewedAfterMs.toFixed(1)} ms after SIGCONT; ` +
          `${gapMs.toFixed(1)} ms between the last confirmed renewal before the pause and the first after`,
      );
    },
    budget(8 * LEASE_MS),
  );

  it(
    'event loop blocked for two leases: a waiter takes over, the holder aborts by its own clock',
    async ({ annotate }) => {
      const { holder, waiter, key, held, acquireSentBefore } = await holderAndWaiter('busy-loop');

      holder.send({ type: 'block', ms: 2 * LEASE_MS });
      const blockedFrom = stamp(await holder.next(ofType('blocking')));
      const taken = await waiter.next(ofType('acquired'), LEASE_MS + 5_000);
      const takenAt = stamp(taken, 'at');
      const atTakeover = await lockState(key);
      const stateReadAt = now();
      expect(atTakeover.owners).toBe(1);
      expectLaterToken(kind, held, taken);

      const takeoverMs = msBetween(blockedFrom, takenAt);
      // The waiter's expiry bound fires late by as much as its event loop was held up.
      expect(takeoverMs).toBeLessThanOrEqual(LEASE_MS + TAKEOVER_SLACK_MS + Number(taken['loopDelayMaxMs']));
      const expiry = earliestExpiry(holder, acquireSentBefore);
      expect(takenAt).toBeGreaterThanOrEqual(expiry - BigInt(EXPIRY_CLOCK_SLACK_MS) * MS);

      const unblockedAt = stamp(await holder.next(ofType('unblocked'), 2 * LEASE_MS + 5_000));
      // The new holder's lock was read before the blocked holder could run again.
      expect(stateReadAt).toBeLessThan(unblockedAt);
      const { abortAfterResumeMs, staleReplies } = await expectLossByOwnClock(
        holder,
        blockedFrom,
        unblockedAt,
      );
      await expectReleaseRefused(holder, key, atTakeover);
      expect(all(waiter, 'abort')).toHaveLength(0);
      await annotate(
        `lease ${LEASE_MS} ms: takeover ${takeoverMs.toFixed(1)} ms after the loop began, ` +
          `${msBetween(expiry, takenAt).toFixed(1)} ms after the earliest expiry ` +
          `(${msBetween(expiryAfterLastSend(holder, blockedFrom), takenAt).toFixed(1)} ms after the last renewal sent + lease); ` +
          `abort ${abortAfterResumeMs.toFixed(1)} ms after it ended; ` +
          `replies to earlier renewals before the abort: ${staleReplies}`,
      );
    },
    budget(10 * LEASE_MS),
  );

  it(
    'killed (SIGKILL): a waiter takes over within a lease + 1 s; no connection or subscription is left',
    async ({ annotate }) => {
      const keyPrefix = uniquePrefix('sigkill');
      const holder = spawn(HOLDER_NAME, keyPrefix);
      const waiter = spawn(WAITER_NAME, keyPrefix);
      await Promise.all([holder, waiter].map((w) => w.next(ofType('ready'), STARTUP_MS)));

      // The holder first waits for the lock, so it has subscribed to the unlock channel, and
      // keeps that subscription (it lingers) while it holds the lock.
      const first = await kind
        .handle(await res.lockClient({ keyPrefix, watchdogTimeoutMs: LEASE_MS }), LOCK_NAME)
        .acquire();
      const channel = kind.channel(first.key);
      holder.send({ type: 'acquire' });
      await waitUntil('the holder subscribed', async () => (await res.numsub(channel)) === 1, 10_000);
      await first.release();
      const held = await holder.next(ofType('acquired'), 5_000);
      const key = String(held['key']);

      waiter.send({ type: 'acquire', leaseMs: 60_000 });
      await waitUntil('the waiter subscribed', async () => (await res.numsub(channel)) === 2, 10_000);
      const holderConnections = (await clientList(observer)).filter((c) => c.name === HOLDER_NAME);
      // Its command connection and its subscriber.
      expect(holderConnections).toHaveLength(2);
      expect(holderConnections.filter((c) => c.sub > 0)).toHaveLength(1);

      await holder.next(ofType('renew-reply'), 2 * LEASE_MS);
      await sleep(Math.random() * RENEW_MS);
      const killedFrom = now();
      holder.kill('SIGKILL');
      expect(await holder.exited).toEqual({ code: null, signal: 'SIGKILL' });

      const taken = await waiter.next(ofType('acquired'), LEASE_MS + 5_000);
      const takenAt = stamp(taken, 'at');
      const takeoverMs = msBetween(killedFrom, takenAt);
      expect(taken['key']).toBe(key);
      expectLaterToken(kind, held, taken);
      expect(takeoverMs).toBeLessThanOrEqual(LEASE_MS + 1_000);
      // A renewal was confirmed before the kill, so that sets the floor, not the acquire.
      const expiry = earliestExpiry(holder, 0n);
      expect(takenAt).toBeGreaterThanOrEqual(expiry - BigInt(EXPIRY_CLOCK_SLACK_MS) * MS);

      waiter.send({ type: 'release' });
      expect(await waiter.next(ofType('release-result'))).toMatchObject({ ok: true });
      await waitUntil(
        "the killed holder's connections are gone",
        async () => !(await clientList(observer)).some((c) => c.name === HOLDER_NAME),
        5_000,
      );
      // Only live subscribers remain: of the two before the kill, the waiter's lingering
      // subscription, nothing of the holder.
      expect(await res.numsub(channel)).toBe(1);
      const subscribers = (await clientList(observer)).filter((c) => c.sub > 0);
      expect(subscribers.map((c) => c.name)).toEqual([WAITER_NAME]);

      // Once the waiter closes its client, nobody listens on the channel any more.
      waiter.send({ type: 'exit' });
      expect(await waiter.exited).toEqual({ code: 0, signal: null });
      await waitUntil('the channel has no subscribers', async () => (await res.numsub(channel)) === 0, 5_000);
      expect((await clientList(observer)).filter((c) => c.name !== '')).toEqual([]);
      await annotate(
        `lease ${LEASE_MS} ms: takeover ${takeoverMs.toFixed(1)} ms after SIGKILL, ` +
          `${msBetween(expiry, takenAt).toFixed(1)} ms after the earliest expiry ` +
          `(${msBetween(expiryAfterLastSend(holder, killedFrom), takenAt).toFixed(1)} ms after the last renewal sent + lease)`,
      );
    },
    budget(10 * LEASE_MS),
  );
});
