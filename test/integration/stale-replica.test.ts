/**
 * A client that reaches a read-only replica by the master's old address (a failover behind a
 * fixed address or a stale DNS entry, a Sentinel client that has not switched yet) must not be
 * told by it that its hold is gone: the replica may not have the latest writes. The lock's
 * scripts refuse to answer from reads alone there (READONLY), so the call is retried until the
 * client reaches the master again, and the hold is neither declared lost nor left locked.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFaultProxy } from '../support/fault-proxy.js';
import { lockClientVia, startStaleReplica, type StaleReplica } from '../support/stale-replica.js';
import { waitUntil } from '../support/wait.js';

describe('a client that reaches a read-only replica', () => {
  let servers: StaleReplica;

  beforeAll(async () => {
    servers = await startStaleReplica();
  }, 30_000);

  afterAll(async () => {
    await servers?.stop();
  });

  it('a release that reaches the replica is retried on the master, not reported as a lost hold', async () => {
    const proxy = await startFaultProxy({ targetHost: '127.0.0.1', targetPort: servers.master.port });
    const client = await lockClientVia(proxy);
    try {
      const lease = await client.locks.lock('ledger').acquire();
      expect(await servers.admin.exists(lease.key)).toBe(1);
      // Wrapped: the release's promise settles only once the master answers.
      const { released } = await servers.viaReplica(proxy, () => ({ released: lease.release() }));
      await released;
      expect(await servers.admin.exists(lease.key)).toBe(0);
      expect(client.lost).toEqual([]);
    } finally {
      await client.close();
      await proxy.close();
    }
  }, 30_000);

  it('a renewal that reaches the replica is retried on the master: the hold lives on', async () => {
    const proxy = await startFaultProxy({ targetHost: '127.0.0.1', targetPort: servers.master.port });
    // Renewed every second; retried every 250 ms after a failed call.
    const client = await lockClientVia(proxy, { watchdogTimeoutMs: 3_000 });
    try {
      const lease = await client.locks.lock('ledger').acquire();
      await servers.viaReplica(proxy, () => undefined);
      // A renewal on the master again: the lease is set anew.
      await waitUntil(
        'renewed on the master',
        async () => (await servers.admin.pTTL(lease.key)) > 2_500,
        5_000,
      );
      expect(client.lost).toEqual([]);
      expect(lease.signal.aborted).toBe(false);
      await lease.release();
      expect(await servers.admin.exists(lease.key)).toBe(0);
    } finally {
      await client.close();
      await proxy.close();
    }
  }, 30_000);
});
