/**
 * The set-up the server-wide fault scenarios share. SCRIPT FLUSH, CLIENT KILL, SIGSTOP and
 * restarts hit every client of a server, so each such file gets a redis-server of its own,
 * never the shared one; plus an admin connection to it, per-test resources closed after each
 * test, and the unhandled rejections seen during each test.
 */
import { afterAll, afterEach, beforeAll, beforeEach } from 'vitest';
import { startRedis, type RedisInstance } from '../support/redis-server.js';
import { testResources, type Redis, type TestResources } from '../support/resources.js';

export interface OwnServer {
  /** The file's own server; set in beforeAll. */
  readonly server: RedisInstance;
  /** A connection of the file's own, opened in beforeAll and closed in afterAll. */
  readonly admin: Redis;
  /** Connections, clients and workers of one test, all closed after it. */
  readonly res: TestResources;
  /** Unhandled rejections seen since the current test began. */
  readonly unhandled: readonly unknown[];
}

/** Registers the hooks of a describe block that owns a server; call it inside the block. */
export function ownServer(): OwnServer {
  let server: RedisInstance | undefined;
  let admin: Redis | undefined;
  let unhandled: unknown[] = [];
  const url = (): string => {
    if (server === undefined) throw new Error('the server is not started yet');
    return server.url;
  };
  const perFile = testResources(url);
  const res = testResources(url);
  const onUnhandled = (reason: unknown): void => {
    unhandled.push(reason);
  };

  beforeAll(async () => {
    server = await startRedis();
    admin = await perFile.connect();
  });

  beforeEach(() => {
    unhandled = [];
    process.on('unhandledRejection', onUnhandled);
  });

  afterEach(async () => {
    process.off('unhandledRejection', onUnhandled);
    await res.closeAll();
  });

  afterAll(async () => {
    await perFile.closeAll();
    await server?.stop();
  });

  return {
    get server(): RedisInstance {
      if (server === undefined) throw new Error('the server is not started yet');
      return server;
    },
    get admin(): Redis {
      if (admin === undefined) throw new Error('the admin connection is not open yet');
      return admin;
    },
    res,
    get unhandled(): readonly unknown[] {
      return unhandled;
    },
  };
}
