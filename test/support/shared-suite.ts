/**
 * The set-up of an integration file that works on the shared server: two connections of its
 * own for the whole file (the one LockClients use, and an admin one for inspecting and
 * playing foreign clients), per-test resources closed after each test, and a key prefix per
 * test that every LockClient of that test shares, so they contend for the same locks.
 */
import { afterAll, afterEach, beforeAll, beforeEach } from 'vitest';
import { LockClient, type LockClientOptions } from '../../src/index.js';
import { uniquePrefix } from './keys.js';
import { sharedRedis } from './redis-server.js';
import { testResources, type LockConnection, type Redis, type TestResources } from './resources.js';

export interface SharedSuite {
  /** The connection LockClients of the file use (of the library under test); set in beforeAll. */
  readonly redis: LockConnection;
  /** A connection for the test's own commands; set in beforeAll. */
  readonly admin: Redis;
  /** Connections, clients and workers of one test, all closed after it. */
  readonly res: TestResources;
  /** The shared server's URL; set in beforeAll. */
  readonly url: string;
  /** A LockClient under the current test's key prefix, closed after the test. */
  readonly lockClient: (options?: LockClientOptions) => LockClient;
}

/** Registers the hooks; call it inside the file's describe block. */
export function sharedSuite(label: string): SharedSuite {
  let url = '';
  let redis: LockConnection | undefined;
  let admin: Redis | undefined;
  let prefix = '';
  const perFile = testResources(() => url);
  const res = testResources(() => url);
  const ready = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('the suite is not set up yet');
    return value;
  };

  beforeAll(async () => {
    ({ url } = await sharedRedis());
    redis = await perFile.connectLocks();
    admin = await perFile.connect();
  });
  beforeEach(() => {
    prefix = uniquePrefix(label);
  });
  afterEach(() => res.closeAll());
  afterAll(() => perFile.closeAll());

  return {
    get redis() {
      return ready(redis);
    },
    get admin() {
      return ready(admin);
    },
    get url() {
      return url;
    },
    res,
    lockClient: (options = {}) => res.track(new LockClient(ready(redis), { keyPrefix: prefix, ...options })),
  };
}
