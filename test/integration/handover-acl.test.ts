/**
 * A LockClient whose Redis user may not run PUBSUB NUMSUB: its releases cannot hand a lock over
 * (their script is refused the count of the waiter's subscribers), so they free it and the
 * waiter takes it by asking. The client says so once, on its error event. Its own file: it runs
 * its LockClient as an ACL user of its own, which the least-privilege run (test/chaos) cannot.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LockClient, LockError } from '../../src/index.js';
import { queueOf, uniquePrefix } from '../support/keys.js';
import { commandsFrom } from '../support/monitor.js';
import { sharedRedis } from '../support/redis-server.js';
import { channelOf, testResources, type Redis } from '../support/resources.js';
import { waitUntil, within } from '../support/wait.js';

describe('a client whose user may not run PUBSUB NUMSUB', () => {
  let url: string;
  let admin: Redis;
  const perFile = testResources(() => url);
  const res = testResources(() => url);

  beforeAll(async () => {
    ({ url } = await sharedRedis());
    admin = await perFile.connect();
  });

  afterEach(() => res.closeAll());

  afterAll(() => perFile.closeAll());

  const queued = async (key: string): Promise<number> => Number(await admin.lLen(queueOf(key)));

  /**
   * Runs `body` with the url of a new ACL user that may do anything but what `denied` takes
   * away (`-pubsub`, `-info`), and drops the user after.
   */
  async function asUserWithout(
    label: string,
    denied: readonly string[],
    body: (url: string) => Promise<void>,
  ): Promise<void> {
    const user = `${uniquePrefix(label)}user`;
    const password = `${label}-password`;
    await admin.sendCommand(['ACL', 'SETUSER', user, 'on', `>${password}`, '~*', '&*', '+@all', ...denied]);
    try {
      const address = new URL(url);
      address.username = user;
      address.password = password;
      await body(address.href);
    } finally {
      await admin.sendCommand(['ACL', 'DELUSER', user]);
    }
  }

  it('says so on the error event, and its waiters still get the lock', async () => {
    // A release whose script may not count the grant channel's subscribers hands nothing over:
    // it frees the lock, and the waiter takes it by asking. The client says so once, up front.
    const prefix = uniquePrefix('handover-acl');
    const key = `${prefix}batch:1`;
    await asUserWithout('no-pubsub', ['-pubsub'], async (userUrl) => {
      const holder = res.track(
        new LockClient(await res.connectLocks({ url: userUrl }), { keyPrefix: prefix }),
      );
      const holderErrors: Error[] = [];
      holder.on('error', (error) => holderErrors.push(error));
      const waiterLocks = await res.lockClient({ keyPrefix: prefix });
      const waiterErrors: Error[] = [];
      waiterLocks.on('error', (error) => waiterErrors.push(error));

      const lease = await holder.lock('batch:1').acquire();
      await waitUntil('the refusal is reported', () => holderErrors.length > 0, 5_000);
      expect(holderErrors).toHaveLength(1);
      const [refusal] = holderErrors;
      expect(refusal).toBeInstanceOf(LockError);
      expect((refusal as LockError).code).toBe('REDIS_ERROR');
      expect(refusal?.message).toMatch(/refused PUBSUB NUMSUB.*NOPERM.*\+pubsub\|numsub/s);

      const waiting = waiterLocks.lock('batch:1').acquire();
      await waitUntil('the waiter is queued', async () => (await queued(key)) === 1, 10_000);
      const monitor = await res.monitor();
      await lease.release();
      const taken = await within(waiting, 2_000, 'the lock after a release that could not hand it over');
      // The release freed the lock and announced it, rather than handing it over.
      const publishes = commandsFrom(monitor.lines).filter((cmd) => cmd[0]?.toUpperCase() === 'PUBLISH');
      expect(publishes.map((cmd) => cmd[1])).toContain(channelOf(key));
      expect(taken.holdCount).toBe(1);
      await taken.release();
      expect(await admin.exists(key)).toBe(0);
      // A user allowed the command hears nothing of it: its check went out with its first calls,
      // on the connection that later asked for the lock, so its answer came before that reply.
      expect(waiterErrors).toEqual([]);
      expect(holderErrors).toHaveLength(1);
    });
  });

  it('says so too when Redis refuses INFO as well, whose check the client then skips', async () => {
    const prefix = uniquePrefix('handover-acl-info');
    await asUserWithout('no-pubsub-no-info', ['-pubsub', '-info'], async (userUrl) => {
      // node-redis whatever the suite's client: ioredis asks INFO before it calls itself ready.
      const locks = res.track(new LockClient(await res.connect({ url: userUrl }), { keyPrefix: prefix }));
      const errors: Error[] = [];
      locks.on('error', (error) => errors.push(error));
      await (await locks.lock('batch:2').acquire()).release();
      await waitUntil('the refusal is reported', () => errors.length > 0, 5_000);
      expect(errors).toHaveLength(1);
      expect((errors[0] as LockError).code).toBe('REDIS_ERROR');
      expect(errors[0]?.message).toMatch(/refused PUBSUB NUMSUB.*NOPERM/s);
    });
  });
});
