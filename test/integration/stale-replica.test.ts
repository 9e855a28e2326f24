/**
 * A client that reaches a read-only replica by the master's old address (a failover behind a
 * fixed address or a stale DNS entry, a Sentinel client that has not switched yet) must not be
 * told by it that its hold is gone: the replica may not have the latest writes. For every kind
 * that holds a lock for an owner, a release, a renewal or a re-entry that reaches a replica
 * lacking the hold is refused there (READONLY) by the kind's scripts, which give no answer from
 * reads alone, so the call is retried until the client reaches the master again, and the hold
 * is neither declared lost nor left held.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Lease } from '../../src/index.js';
import { startFaultProxy } from '../support/fault-proxy.js';
import { KINDS, type Kind } from '../support/kinds.js';
import { lockClientVia, startStaleReplica, type StaleReplica } from '../support/stale-replica.js';
import { settle, waitUntil, type Settled } from '../support/wait.js';

describe('a client that reaches a read-only replica', () => {
  let servers: StaleReplica;

  beforeAll(async () => {
    servers = await startStaleReplica();
  }, 30_000);

  afterAll(async () => {
    await servers?.stop();
  });

  /** Whether the lock's key outlives its last hold (a permit semaphore's counter of free permits). */
  function keyLasts(kind: Kind, key: string): boolean {
    return kind.lastingKeys(key).includes(key);
  }

  describe.each(KINDS)('$name', (kind) => {
    it('a release that reaches the replica is retried on the master, not reported as a lost hold', async () => {
      const proxy = await startFaultProxy({ targetHost: '127.0.0.1', targetPort: servers.master.port });
      const client = await lockClientVia(proxy);
      try {
        const lease = await kind.handle(client.locks, 'ledger').acquire();
        expect((await kind.inspect(servers.admin, lease.key)).owners).toBe(1);
        const before = await servers.refusals();
        let released: Promise<Settled<void>> | undefined;
        const detour = await settle(servers.viaReplica(proxy, () => (released = settle(lease.release()))));
        // Were the replica's answer taken, the release would have failed with the hold declared
        // lost, or (a retry after the reset connection, taken for a replay of a release that was
        // applied) resolved with the lock still held on the master.
        expect((await released)?.error).toBeUndefined();
        expect(client.lost).toEqual([]);
        const after = await kind.inspect(servers.admin, lease.key);
        expect(after.owners).toBe(0);
        expect(after.type).toBe('none');
        expect(await servers.admin.exists(lease.key)).toBe(keyLasts(kind, lease.key) ? 1 : 0);
        expect(detour.error).toBeUndefined();
        expect(await servers.refusals()).toBeGreaterThan(before);
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
        const lease = await kind.handle(client.locks, 'ledger').acquire();
        const before = await servers.refusals();
        const detour = await settle(servers.viaReplica(proxy, () => undefined));
        // Were the replica's answer taken, the watchdog would have declared the hold lost.
        expect(client.lost).toEqual([]);
        expect(detour.error).toBeUndefined();
        expect(await servers.refusals()).toBeGreaterThan(before);
        // A renewal on the master again: the lease is set anew.
        await waitUntil(
          'renewed on the master',
          async () => (await kind.inspect(servers.admin, lease.key)).pttl > 2_500,
          5_000,
        );
        expect(client.lost).toEqual([]);
        expect(lease.signal.aborted).toBe(false);
        await lease.release();
        expect((await kind.inspect(servers.admin, lease.key)).owners).toBe(0);
        expect(await servers.admin.exists(lease.key)).toBe(keyLasts(kind, lease.key) ? 1 : 0);
      } finally {
        await client.close();
        await proxy.close();
      }
    }, 30_000);
  });

  // A re-entry to a replica that lacks the hold finds a count other than the caller's.
  describe.each(KINDS.filter((kind) => kind.reentrant))('$name', (kind) => {
    it('a re-entry that reaches the replica is retried on the master, not reported as a lost hold', async () => {
      const proxy = await startFaultProxy({ targetHost: '127.0.0.1', targetPort: servers.master.port });
      const client = await lockClientVia(proxy);
      try {
        const handle = kind.handle(client.locks, 'ledger');
        await handle.withLock(async (outer) => {
          const before = await servers.refusals();
          let entered: Promise<Settled<Lease>> | undefined;
          const detour = await settle(servers.viaReplica(proxy, () => (entered = settle(handle.acquire()))));
          // Were the replica's answer taken, the re-entry would have failed with the hold
          // declared lost.
          const inner = await entered;
          expect(inner?.error).toBeUndefined();
          expect(client.lost).toEqual([]);
          expect(outer.signal.aborted).toBe(false);
          expect((await kind.inspect(servers.admin, outer.key)).counts).toEqual([2]);
          expect(detour.error).toBeUndefined();
          expect(await servers.refusals()).toBeGreaterThan(before);
          await inner?.value?.release();
        });
        expect((await kind.inspect(servers.admin, handle.key)).owners).toBe(0);
      } finally {
        await client.close();
        await proxy.close();
      }
    }, 30_000);
  });
});
