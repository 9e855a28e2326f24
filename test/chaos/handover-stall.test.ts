/**
 * A waiter that stalls while a release hands it the lock. B, a waiter in a process of its own,
 * is queued in Redis behind holder A; B's event loop is blocked (or its process frozen with
 * SIGSTOP) for two leases. Meanwhile A releases, and the release hands the lock to B: B's owner
 * field goes into the lock with B's lease, and the grant is published on B's grant channel,
 * where B cannot read it. B's lease runs out before B runs again, and a third owner C takes the
 * lock and holds it. What B must do when it runs again:
 *   - not take the lock on the strength of that old grant while C holds it (mutual exclusion):
 *     its `acquired` comes after C's release, and its release then succeeds;
 *   - not believe it is still queued: the hand-over took its entry out of the queue, so it must
 *     queue again, and be served when C releases, before a waiter D that queued after B ran
 *     again.
 * Real processes, a real redis-server of the file's own, real stalls. Times are monotonic
 * nanosecond stamps, comparable across the processes of the machine.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { Lease, LockClient } from '../../src/index.js';
import type { Worker, WorkerMessage } from '../support/child.js';
import { queueOf, uniquePrefix } from '../support/keys.js';
import { msBetween, now, ofType, stamp } from '../support/stamps.js';
import { sleep, waitUntil } from '../support/wait.js';
import { ownServer } from './own-server.js';
import { scaled } from './scale.js';

const WAITER = new URL('./fixtures/stall-waiter.ts', import.meta.url).pathname;
/** Every lease of the scenario: B's (its watchdog lease, which a hand-over to it sets), C's, D's. */
const LEASE_MS = scaled(1_000, 2_000);
/** How long B stalls: its hand-over lease runs out well before it runs again. */
const STALL_MS = 2 * LEASE_MS;
/** How late after the lock is free for it a waiter at the head of the queue may be served. */
const SERVE_SLACK_MS = 300;
// Child processes start through tsx, which takes a while on a busy machine.
const STARTUP_MS = 20_000;
const LOCK_NAME = 'ledger:close';
const MS = 1_000_000n;

type Stall = 'event loop blocked' | 'SIGSTOP';

function later(...stamps: bigint[]): bigint {
  return stamps.reduce((a, b) => (a > b ? a : b));
}

async function sleepUntil(at: bigint): Promise<void> {
  const left = at - now();
  if (left > 0n) await sleep(Number(left / MS) + 1);
}

/** The next message matching `predicate` within `ms`, or undefined. */
async function nextWithin(
  worker: Worker,
  predicate: (msg: WorkerMessage) => boolean,
  ms: number,
): Promise<WorkerMessage | undefined> {
  try {
    return await worker.next(predicate, ms);
  } catch {
    return undefined;
  }
}

/** How many of the worker's acquire-script calls have no reply yet. */
function unanswered(worker: Worker): number {
  const answered = new Set(
    worker.messages.filter(ofType('attempt-reply', 'attempt-error')).map((msg) => msg['id']),
  );
  return worker.messages.filter((msg) => ofType('attempt-sent')(msg) && !answered.has(msg['id'])).length;
}

/** B's acquire-script calls sent after `from`, as `queued -> reply` (for annotations). */
function attemptsAfter(worker: Worker, from: bigint): string {
  const replies = new Map(
    worker.messages
      .filter(ofType('attempt-reply'))
      .map((msg) => [
        msg['id'],
        typeof msg['reply'] === 'number'
          ? `pttl ${msg['reply']}${msg['requeued'] === true ? ', queued anew' : ''}`
          : 'nil (taken)',
      ]),
  );
  const sent = worker.messages.filter((msg) => ofType('attempt-sent')(msg) && stamp(msg) > from);
  if (sent.length === 0) return 'none';
  return sent
    .map(
      (msg) =>
        `+${msBetween(from, stamp(msg)).toFixed(0)} ms queued=${String(msg['queued'])} -> ${replies.get(msg['id']) ?? 'no reply'}`,
    )
    .join('; ');
}

/**
 * A process's scheduling state from /proc (Linux): `stopped` once a SIGSTOP has taken effect.
 * Elsewhere, where the tests cannot tell, it is taken to have.
 */
function processState(pid: number): 'stopped' | 'running' {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return 'stopped';
  }
  // `pid (comm) state ...`; comm may hold spaces and parentheses.
  const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  return state === 'T' || state === 't' ? 'stopped' : 'running';
}

describe('a waiter stalled while a release hands it the lock', () => {
  const env = ownServer();
  const { res } = env;

  const queueLength = async (key: string): Promise<number> => Number(await env.admin.lLen(queueOf(key)));

  interface Stalled {
    readonly waiter: Worker;
    readonly keyPrefix: string;
    readonly key: string;
    /** C's hold, taken once B's hand-over lease ran out, while B still stalled. */
    readonly cLease: Lease;
    readonly cTakenAt: bigint;
    readonly stalledAt: bigint;
    readonly resumedAt: bigint;
    /** Stamp of A's release, which handed the lock to B. */
    readonly handedAt: bigint;
  }

  /**
   * A holds the lock with a lease of `holderLeaseMs`; B queues behind it and stalls for
   * STALL_MS; A's release hands the lock to B; B's lease runs out; C takes the lock; B runs
   * again. Checks each step of the set-up as it goes, so a broken harness fails here, not in
   * the assertions of the tests.
   */
  async function stallThroughHandOver(label: string, stall: Stall, holderLeaseMs: number): Promise<Stalled> {
    const keyPrefix = uniquePrefix(label);
    const key = keyPrefix + LOCK_NAME;
    const waiter = res.worker(WAITER, {
      REDIS_URL: env.server.url,
      KEY_PREFIX: keyPrefix,
      LOCK_NAME,
      WATCHDOG_MS: String(LEASE_MS),
      // Long enough that the subscription outlives every check of a test.
      LINGER_MS: '60000',
    });
    await waiter.next(ofType('ready'), STARTUP_MS);
    const a = await res.lockClient({ keyPrefix });
    const c = await res.lockClient({ keyPrefix, watchdogTimeoutMs: LEASE_MS });

    const aLease = await a.lock(LOCK_NAME).acquire({ leaseMs: holderLeaseMs });
    const aFields = await env.admin.hKeys(key);
    // Owner fields are secret: only their count and equality go into assertions.
    expect(aFields.length, 'set-up: A holds the lock').toBe(1);

    // B waits: an attempt queues it, and the reply (A's PTTL) sets its wait timer, as the head
    // (and only) waiter of its process.
    waiter.send({ type: 'acquire' });
    await waitUntil(
      'B is queued and has every reply to its attempts',
      async () => (await queueLength(key)) === 1 && unanswered(waiter) === 0,
      10_000,
    );
    // Let the library take the reply in and park B in its wait.
    await sleep(50);

    let stalledAt: bigint;
    if (stall === 'event loop blocked') {
      waiter.send({ type: 'block', ms: STALL_MS });
      stalledAt = stamp(await waiter.next(ofType('blocking'), 5_000));
    } else {
      stalledAt = now();
      waiter.kill('SIGSTOP');
      // The signal takes effect when the process next runs: a grant that reached it first would
      // be read before its wait timer when it is thawed.
      await waitUntil('B is stopped', () => processState(waiter.pid) === 'stopped', 2_000);
    }
    const resumeAt = stalledAt + BigInt(STALL_MS) * MS;

    // A's release hands the lock to B, which cannot hear of it.
    const handedAt = now();
    await aLease.release();
    const fields = await env.admin.hKeys(key);
    const handOverPttl = await env.admin.pTTL(key);
    expect(fields.length, 'set-up: the release handed the lock to one owner').toBe(1);
    expect(fields[0] === aFields[0], "set-up: the lock went to B, not kept by A's field").toBe(false);
    expect(handOverPttl, "set-up: the hand-over set B's lease").toBeGreaterThan(0);
    expect(handOverPttl, "set-up: the hand-over set B's lease").toBeLessThanOrEqual(LEASE_MS);
    expect(await queueLength(key), "set-up: the hand-over took B's entry out of the queue").toBe(0);

    // B's lease runs out while it stalls; C takes the lock as soon as it is free.
    const cLock = c.lock(LOCK_NAME);
    let cLease: Lease | undefined;
    let cTakenAt = 0n;
    while (cLease === undefined) {
      if (now() > resumeAt - 200n * MS)
        throw new Error('set-up: C could not take the lock before B ran again');
      const sentAt = now();
      cLease = (await cLock.tryAcquire()) ?? undefined;
      if (cLease === undefined) await sleep(5);
      else cTakenAt = sentAt;
    }
    expect(
      msBetween(handedAt, cTakenAt),
      "set-up: C took the lock only once B's hand-over lease ran out",
    ).toBeGreaterThanOrEqual(LEASE_MS - 50);

    let resumedAt: bigint;
    if (stall === 'event loop blocked') {
      resumedAt = stamp(await waiter.next(ofType('unblocked'), STALL_MS + 5_000));
    } else {
      await sleepUntil(resumeAt);
      resumedAt = now();
      waiter.kill('SIGCONT');
    }
    expect(cTakenAt, 'set-up: C held the lock before B ran again').toBeLessThan(resumedAt);
    return { waiter, keyPrefix, key, cLease, cTakenAt, stalledAt, resumedAt, handedAt };
  }

  /**
   * A's lease is short (1.5 leases), so B's wait timer, bounded by A's PTTL, is overdue when B
   * runs again and fires before B reads the old grant.
   */
  async function staleGrant(
    stall: Stall,
    label: string,
    annotate: (message: string) => Promise<unknown>,
  ): Promise<void> {
    const s = await stallThroughHandOver(label, stall, 1.5 * LEASE_MS);
    const { waiter } = s;

    // C holds the lock for two leases, and at least one after B runs again.
    await sleepUntil(later(s.cTakenAt + 2n * BigInt(LEASE_MS) * MS, s.resumedAt + BigInt(LEASE_MS) * MS));
    const fieldsWhileC = (await env.admin.hKeys(s.key)).length;
    const cReleaseFrom = now();
    await s.cLease.release();

    const outcome = await nextWithin(waiter, ofType('acquired', 'acquire-failed'), LEASE_MS + 5_000);
    let release: WorkerMessage | undefined;
    if (outcome?.['type'] === 'acquired') {
      waiter.send({ type: 'release' });
      release = await waiter.next(ofType('release-result'), 5_000);
    }
    const acquiredAt = outcome?.['type'] === 'acquired' ? stamp(outcome, 'at') : undefined;
    await annotate(
      `${stall}, lease ${LEASE_MS} ms: B stalled ${msBetween(s.stalledAt, s.resumedAt).toFixed(0)} ms; ` +
        `C took the lock ${msBetween(s.handedAt, s.cTakenAt).toFixed(0)} ms after the hand-over to B; ` +
        `B's attempts after it ran again: ${attemptsAfter(waiter, s.resumedAt)}; ` +
        `B acquired ${acquiredAt === undefined ? 'never' : `${msBetween(cReleaseFrom, acquiredAt).toFixed(1)} ms after C's release began`}; ` +
        `owner fields in the lock just before C's release: ${fieldsWhileC}; ` +
        `B's release: ${release === undefined ? 'not tried' : JSON.stringify(release['ok'] === true ? 'ok' : release['code'])}`,
    );

    expect(outcome, 'B acquired the lock after C released it').toMatchObject({ type: 'acquired' });
    if (acquiredAt === undefined) return;
    expect(
      acquiredAt > cReleaseFrom,
      `B reported the lock acquired ${msBetween(acquiredAt, cReleaseFrom).toFixed(1)} ms before C released it, ` +
        `while C held it (${msBetween(s.resumedAt, acquiredAt).toFixed(1)} ms after B ran again)`,
    ).toBe(true);
    expect(
      msBetween(cReleaseFrom, acquiredAt),
      "B was served within a lease (+ slack) of C's release",
    ).toBeLessThanOrEqual(LEASE_MS + SERVE_SLACK_MS);
    expect(release, "B's release of the lock it was served").toMatchObject({
      type: 'release-result',
      ok: true,
    });
    expect(await env.admin.exists(s.key)).toBe(0);
  }

  it(
    'event loop blocked for two leases through a hand-over: B does not take the lock while C holds it',
    async ({ annotate }) => {
      await staleGrant('event loop blocked', 'stale-grant-block', annotate);
    },
    2 * STARTUP_MS + 12 * LEASE_MS,
  );

  it(
    'frozen (SIGSTOP) for two leases through a hand-over: B does not take the lock while C holds it',
    async ({ annotate }) => {
      await staleGrant('SIGSTOP', 'stale-grant-stop', annotate);
    },
    2 * STARTUP_MS + 12 * LEASE_MS,
  );

  it(
    'a waiter whose grant was used up queues again: served when C releases, before a later waiter D',
    async ({ annotate }) => {
      // A's lease is long, so B's wait timer is not due when B runs again: B reads the old
      // grant first, finds it stale, and asks Redis, which finds C holding the lock.
      const s = await stallThroughHandOver('used-grant', 'event loop blocked', 8 * LEASE_MS);
      const { waiter } = s;

      // D comes after B has run for half a lease.
      await sleepUntil(s.resumedAt + BigInt(LEASE_MS / 2) * MS);
      const tookEarly = waiter.messages.some(ofType('acquired'));
      const d: LockClient = await res.lockClient({ keyPrefix: s.keyPrefix, watchdogTimeoutMs: LEASE_MS });
      const queuedBeforeD = await queueLength(s.key);
      let dAcquiredAt: bigint | undefined;
      let dLease: Lease | undefined;
      const dWaiting = d
        .lock(LOCK_NAME)
        .acquire()
        .then((lease) => {
          dAcquiredAt = now();
          dLease = lease;
        })
        .catch(() => undefined);
      await waitUntil('D is queued', async () => (await queueLength(s.key)) === queuedBeforeD + 1, 5_000);

      await sleepUntil(later(s.cTakenAt + 2n * BigInt(LEASE_MS) * MS, now()));
      const cReleaseFrom = now();
      await s.cLease.release();

      const served = await nextWithin(
        waiter,
        ofType('acquired', 'acquire-failed'),
        LEASE_MS + SERVE_SLACK_MS + 1_000,
      );
      const servedAt = served?.['type'] === 'acquired' ? stamp(served, 'at') : undefined;
      if (servedAt !== undefined) {
        waiter.send({ type: 'release' });
        expect(await waiter.next(ofType('release-result'), 5_000)).toMatchObject({ ok: true });
        await Promise.race([dWaiting, sleep(5_000)]);
      }
      const dAt = (): string =>
        dAcquiredAt === undefined
          ? 'not yet'
          : `${msBetween(cReleaseFrom, dAcquiredAt).toFixed(1)} ms after it`;
      await annotate(
        `lease ${LEASE_MS} ms: B's attempts after it ran again: ${attemptsAfter(waiter, s.resumedAt)}; ` +
          `queue length when D came: ${queuedBeforeD}; C's release began ${msBetween(s.resumedAt, cReleaseFrom).toFixed(0)} ms after B ran again; ` +
          `B served ${servedAt === undefined ? 'not' : `${msBetween(cReleaseFrom, servedAt).toFixed(1)} ms after it`}; D served ${dAt()}`,
      );

      expect(tookEarly, 'B took the lock on its old grant while C held it').toBe(false);
      expect(
        servedAt,
        `B was not served within ${LEASE_MS + SERVE_SLACK_MS} ms of C's release; D (queued after B ran again) ` +
          `was served ${dAt()}; B was queued in Redis: ${queuedBeforeD === 1 ? 'yes' : 'no'}`,
      ).toBeDefined();
      if (servedAt === undefined) return;
      expect(servedAt > cReleaseFrom, 'B was served after C released').toBe(true);
      expect(
        msBetween(cReleaseFrom, servedAt),
        "B was served within a lease of C's release",
      ).toBeLessThanOrEqual(LEASE_MS + SERVE_SLACK_MS);
      expect(dAcquiredAt, 'D is served once B releases').toBeDefined();
      expect((dAcquiredAt ?? 0n) > servedAt, 'D was served after B').toBe(true);
      await dLease?.release();
    },
    2 * STARTUP_MS + 15 * LEASE_MS,
  );
});
