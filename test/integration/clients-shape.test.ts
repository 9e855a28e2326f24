/**
 * Each client library latchkey takes is recognised by its shape (latchkey imports none of them):
 * a lock round-trips on it, a release hands the lock to a waiter of another LockClient on the
 * same library, woken through that library's own subscriber connection, and a mode latchkey
 * does not drive is refused in the constructor with a message naming what is supported. GLIDE's
 * cluster client needs a cluster: it is tested in test/topology/cluster.test.ts.
 * Runs whatever LATCHKEY_TEST_CLIENT says: it makes its own clients of every library.
 */
import { GlideClient, GlideClientConfiguration } from '@valkey/valkey-glide';
import { Redis as IoValkey } from 'iovalkey';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { InvalidArgumentError, LockClient } from '../../src/index.js';
import { adapt, isConnection } from '../../src/redis/adapt.js';
import {
  connectClient,
  destroyClient,
  GLIDE_REQUEST_TIMEOUT_MS,
  type LockConnection,
  type TestClientLibrary,
} from '../support/clients.js';
import { uniquePrefix } from '../support/keys.js';
import { sharedRedis } from '../support/redis-server.js';
import { channelOf, testResources, type Redis } from '../support/resources.js';
import { waitUntil, within } from '../support/wait.js';

const LIBRARIES: readonly TestClientLibrary[] = ['node-redis', 'ioredis', 'iovalkey', 'glide'];

describe('client libraries recognised by shape', () => {
  let url: string;
  let admin: Redis;
  const perFile = testResources(() => url);
  const res = testResources(() => url);
  const made: LockConnection[] = [];

  const connect = async (library: TestClientLibrary): Promise<LockConnection> => {
    const client = await connectClient({ url }, library);
    made.push(client);
    return client;
  };

  beforeAll(async () => {
    ({ url } = await sharedRedis());
    admin = await perFile.connect();
  });

  afterEach(async () => {
    await res.closeAll();
    for (const client of made.splice(0)) destroyClient(client);
  });

  afterAll(() => perFile.closeAll());

  it.each(LIBRARIES)('names %s as the library of its adapter', async (library) => {
    const adapted = adapt(await connect(library));
    expect(isConnection(adapted)).toBe(true);
    expect(isConnection(adapted) ? adapted.library : adapted.problem).toBe(library);
  });

  it.each(LIBRARIES)(
    'holds a lock and hands it over to a waiter woken through its pub/sub on %s',
    async (library) => {
      const prefix = uniquePrefix(`shape-${library}`);
      const holder = res.track(new LockClient(await connect(library), { keyPrefix: prefix }));
      const waiter = res.track(new LockClient(await connect(library), { keyPrefix: prefix }));
      const lease = await holder.lock('order').acquire();
      expect(await admin.exists(`${prefix}order`)).toBe(1);

      const waiting = waiter.lock('order').acquire({ waitMs: 10_000 });
      // The waiter listens on the lock's channel through its own subscriber connection.
      await waitUntil(
        'the waiter subscribes',
        async () => (await res.numsub(channelOf(`${prefix}order`))) === 1,
      );
      await lease.release();
      const handed = await within(waiting, 3_000, 'the hand-over');
      expect(handed.holdCount).toBe(1);
      await handed.release();
      expect(await admin.exists(`${prefix}order`)).toBe(0);
    },
  );

  it('refuses a lazy iovalkey client, naming iovalkey', () => {
    const lazy = new IoValkey(url, { lazyConnect: true });
    try {
      expect(() => new LockClient(lazy)).toThrow(InvalidArgumentError);
      expect(() => new LockClient(lazy)).toThrow(/the iovalkey client is not connected/);
    } finally {
      lazy.disconnect();
    }
  });

  it('refuses a closed GLIDE client and one created with subscriptions', async () => {
    const port = Number(new URL(url).port);
    const closed = await GlideClient.createClient({ addresses: [{ host: '127.0.0.1', port }] });
    closed.close();
    expect(() => new LockClient(closed)).toThrow(/the GLIDE client is closed/);

    const subscribed = await GlideClient.createClient({
      addresses: [{ host: '127.0.0.1', port }],
      requestTimeout: GLIDE_REQUEST_TIMEOUT_MS,
      pubsubSubscriptions: {
        channelsAndPatterns: { [GlideClientConfiguration.PubSubChannelModes.Exact]: new Set(['news']) },
      },
    });
    try {
      expect(() => new LockClient(subscribed)).toThrow(/created with `pubsubSubscriptions`/);
    } finally {
      subscribed.close();
    }
  });
});
