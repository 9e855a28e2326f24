/**
 * A withdrawal must not give back a hand-over that another acquire of the same owner is about
 * to use. Owner O (a `withLock` callback in a process of its own) has two acquires waiting on
 * lock K behind holder H: #1 (`tryAcquire({ waitMs })`, queued as entry X) and #2 (`acquire()`,
 * queued as entry Y behind X). O's event loop blocks (Atomics.wait) right after #2's first
 * attempt is written out, before #1's deadline, and stays blocked well past it. Meanwhile H
 * releases: the release pops X and hands K to O's owner field, and the grant for X waits
 * unread on O's subscriber socket. When O runs again, Node runs the overdue timers before it
 * reads any socket: #1 gives up, and its withdrawal (after #2's attempt, on the owner's chain)
 * finds X popped and passes the field on, which hands K to O again through Y. Then O reads the
 * old grant for X: a ticket that left, so a second withdrawal follows. Before the fix, that one
 * found the field handed over and no hold of the owner (#2 had not used its grant for Y yet:
 * its attempt came after the withdrawal on the chain), deleted the field and freed K; #2 then
 * took the grant for Y without asking Redis, and O believed it held a lock Redis called free.
 *
 * #2's first attempt must be in flight across the stall: had #2 parked in its wait first, #1's
 * leaving (as head of O's local waiters) would wake it, and its attempt would take the lock
 * before the second withdrawal ran.
 *
 * The safety property checked: while O believes it holds K (from #2 resolving to O's release),
 * Redis agrees (the lock has one field), a third client C cannot take K, and O's release
 * succeeds and frees K. Real processes, a real redis-server of the file's own, a real stall;
 * times are monotonic nanosecond stamps.
 */
import { describe, expect, it } from 'vitest';
import type { Lease } from '../../src/index.js';
import type { Worker } from '../support/child.js';
import { queueOf, uniquePrefix } from '../support/keys.js';
import { msBetween, now, ofType, stamp } from '../support/stamps.js';
import { sleep, waitUntil } from '../support/wait.js';
import { ownServer } from './own-server.js';
import { scaled } from './scale.js';

const OWNER = new URL('./fixtures/stall-owner.ts', import.meta.url).pathname;
/** #1's wait: it runs out while O is blocked. */
const WAIT_MS = 400;
/** How long O's event loop stays blocked: well past #1's deadline. */
const BLOCK_MS = WAIT_MS + scaled(600, 1_000);
/** How long after O blocked H releases: O is surely asleep by then. */
const RELEASE_AFTER_MS = 100;
/** O's watchdog lease, which a hand-over to O sets, and H's lease: nothing expires meanwhile. */
const LEASE_MS = 10_000;
// Child processes start through tsx, which takes a while on a busy machine.
const STARTUP_MS = 10_000;
const TEST_TIMEOUT_MS = 20_000;
const LOCK_NAME = 'ledger:close';
const OUTER_NAME = 'ledger:batch';
const MS = 1_000_000n;

describe('a withdrawal while another acquire of the same owner waits', () => {
  const env = ownServer();
  const { res } = env;

  const queueLength = async (key: string): Promise<number> => Number(await env.admin.lLen(queueOf(key)));

  it(
    'the owner stalls through a hand-over to its acquire that gave up: its other acquire holds the lock in Redis too',
    async ({ annotate }) => {
      const keyPrefix = uniquePrefix('withdraw-same-owner');
      const key = keyPrefix + LOCK_NAME;
      const owner: Worker = res.worker(OWNER, {
        REDIS_URL: env.server.url,
        KEY_PREFIX: keyPrefix,
        LOCK_NAME,
        OUTER_NAME,
        WATCHDOG_MS: String(LEASE_MS),
        // Long enough that O keeps listening on K's channel from the warm-up to the end.
        LINGER_MS: '60000',
      });
      await owner.next(ofType('ready'), STARTUP_MS);
      const h = await res.lockClient({ keyPrefix });
      const c = await res.lockClient({ keyPrefix });

      const hLease = await h.lock(LOCK_NAME).acquire({ leaseMs: LEASE_MS });
      const hFields = await env.admin.hKeys(key);
      // Owner fields are secret: only their count and equality go into assertions.
      expect(hFields.length, 'set-up: H holds the lock').toBe(1);

      // O subscribes to its grant channel and K's channel before the scenario, so #1 queues
      // with its first attempt and parks at once.
      owner.send({ type: 'warm', waitMs: 50 });
      expect(await owner.next(ofType('warmed'), 5_000), 'set-up: the warm-up waited in vain').toMatchObject({
        result: 'null',
      });
      expect(await queueLength(key), 'set-up: the warm-up left the queue').toBe(0);

      owner.send({ type: 'go', waitMs: WAIT_MS, blockMs: BLOCK_MS });
      const started = await owner.next(ofType('go-started'), 5_000);
      const firstDeadline = stamp(started, 'deadline');
      await owner.next(ofType('first-queued'), 5_000);
      const blocking = await owner.next(ofType('blocking'), 5_000);
      const blockedAt = stamp(blocking);
      expect(blocking['leftMs'], "set-up: O blocked before #1's deadline").toBeGreaterThan(0);
      const resumeAt = blockedAt + BigInt(BLOCK_MS) * MS;

      // #2's first attempt, written out right before O blocked, queues Y behind X.
      await waitUntil('X and Y are both queued', async () => (await queueLength(key)) === 2, 2_000);
      await sleep(RELEASE_AFTER_MS);
      expect(owner.messages.some(ofType('unblocked')), 'set-up: O was still blocked when H released').toBe(
        false,
      );

      // H's release hands K to O through X, and O cannot hear of it.
      const handedAt = now();
      await hLease.release();
      const fields = await env.admin.hKeys(key);
      expect(fields.length, 'set-up: the release handed the lock to one owner').toBe(1);
      expect(fields[0] === hFields[0], 'set-up: the lock went to O, not kept by H').toBe(false);
      expect(await queueLength(key), 'set-up: the hand-over popped X and left Y').toBe(1);
      expect(now() < resumeAt - 100n * MS, 'set-up: H released well before O ran again').toBe(true);

      const unblocked = await owner.next(ofType('unblocked'), BLOCK_MS + 5_000);
      const resumedAt = stamp(unblocked);
      expect(resumedAt > firstDeadline, "set-up: O ran again after #1's deadline").toBe(true);
      const first = await owner.next(ofType('first-result'), 5_000);
      const second = await owner.next(ofType('second-acquired', 'second-failed'), 5_000);
      expect(first['result'], '#1 gave up: its wait ran out while O was blocked').toBe('null');
      expect(second, 'acquire #2 resolved holding the lock').toMatchObject({ type: 'second-acquired' });
      const acquiredAt = stamp(second, 'at');

      // O believes it holds K until it releases: Redis must agree, and C must not get in.
      const cTriedAt = now();
      let cLease: Lease | null = await c.lock(LOCK_NAME).tryAcquire();
      const cTook = cLease !== null;
      await cLease?.release().catch(() => undefined);
      cLease = null;
      const fieldsWhileO = (await env.admin.hKeys(key)).length;

      const releaseFrom = now();
      owner.send({ type: 'release' });
      const release = await owner.next(ofType('release-result'), 5_000);
      const existsAfter = await env.admin.exists(key);
      await owner.next(ofType('outer-done', 'outer-failed'), 5_000);

      await annotate(
        `O blocked ${msBetween(blockedAt, resumedAt).toFixed(0)} ms, ${Number(blocking['leftMs']).toFixed(0)} ms ` +
          `before #1's deadline; H released ${msBetween(blockedAt, handedAt).toFixed(0)} ms into it; ` +
          `#2 resolved ${msBetween(resumedAt, acquiredAt).toFixed(1)} ms after O ran again, when the lock had ` +
          `${String(second['hlen'])} field(s) (exists ${String(second['exists'])}); C tried ` +
          `${msBetween(acquiredAt, cTriedAt).toFixed(1)} ms later and ${cTook ? 'TOOK the lock' : 'was refused'}; ` +
          `fields after C: ${fieldsWhileO}; O's release ${msBetween(releaseFrom, stamp(release)).toFixed(1)} ms ` +
          `later: ${release['ok'] === true ? 'ok' : String(release['code'])}`,
      );

      expect(cTook, 'C took the lock while O believed it held it').toBe(false);
      expect(release, "O's release of the lock #2 acquired").toMatchObject({ ok: true });
      expect(
        { hlen: second['hlen'], exists: second['exists'] },
        "right after acquire #2 resolved, the lock key holds one field, O's",
      ).toEqual({ hlen: 1, exists: 1 });
      expect(fieldsWhileO, 'the lock still has one field (O) after C was refused').toBe(1);
      expect(existsAfter, "O's release freed the lock").toBe(0);
      expect(owner.messages.filter(ofType('lockLost')), 'O lost no lock').toEqual([]);
    },
    TEST_TIMEOUT_MS,
  );
});
