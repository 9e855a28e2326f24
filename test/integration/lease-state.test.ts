/**
 * What a lease says about itself: how it prints and serialises (never its owner's token), why a
 * release of a lost lease is refused, and its checks once its lease ran out while this process
 * could not run a timer (its event loop blocked by synchronous work).
 */
import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { LockLostError, LockNotOwnedError, PermitLease, type LockClient } from '../../src/index.js';
import { KINDS } from '../support/kinds.js';
import { sharedSuite } from '../support/shared-suite.js';

const LEASE_MS = 300;

/** Blocks this process's event loop for `ms`: no timer or socket read runs meanwhile. */
function blockFor(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** Everything Redis keeps of the lock with key `key` and the keys beside it, as one string. */
async function everythingStored(suite: ReturnType<typeof sharedSuite>, key: string): Promise<string> {
  const keys = await suite.admin.keys(`*${key}*`);
  const values = await Promise.all(
    keys.map(async (name) => {
      const type = await suite.admin.type(name);
      if (type === 'hash') return JSON.stringify(await suite.admin.hGetAll(name));
      if (type === 'zset') return JSON.stringify(await suite.admin.zRange(name, 0, -1));
      if (type === 'string') return String(await suite.admin.get(name));
      return '';
    }),
  );
  return values.join(' ');
}

describe('a lease about itself', () => {
  const suite = sharedSuite('lease-state');

  describe.each(KINDS)('$name', (kind) => {
    it('prints and serialises its lock, hold count and state, and no owner token', async () => {
      const locks = suite.lockClient();
      const lease = await kind.handle(locks, 'invoice:42').acquire();
      const printed = inspect(lease);
      const json = JSON.stringify(lease);
      expect(printed).toContain("name: 'invoice:42'");
      expect(printed).toContain('holdCount: 1');
      expect(JSON.parse(json)).toMatchObject({
        name: 'invoice:42',
        key: lease.key,
        holdCount: 1,
        released: false,
        lost: false,
      });
      if (kind.fenced) expect(JSON.parse(json)).toHaveProperty('token', String(kind.tokenOf(lease)));
      // Whatever names the owner in Redis (hash fields, tokens, permit ids) is in neither.
      const stored = await everythingStored(suite, lease.key);
      const secrets = [
        ...(stored.match(/[0-9a-f]{8}-[0-9a-f-]{27}[^"\s]*|[0-9a-f]{32}/g) ?? []),
        ...(lease instanceof PermitLease ? [lease.permitId] : []),
      ];
      expect(secrets.length).toBeGreaterThan(0);
      for (const secret of secrets) {
        expect(printed).not.toContain(secret);
        expect(json).not.toContain(secret);
      }
      await lease.release();
      expect(JSON.parse(JSON.stringify(lease))).toMatchObject({ released: true, holdCount: 0 });
    });

    it('reads as lost at the first check once its lease ran out while no timer could run', async () => {
      const locks = suite.lockClient();
      const lost: string[] = [];
      locks.on('lockLost', (event) => lost.push(event.error.reason));
      const lease = await kind.handle(locks, 'report:7').acquire({ leaseMs: LEASE_MS });
      const signal = lease.signal;
      expect(signal.aborted).toBe(false);
      blockFor(LEASE_MS + 50);
      // No timer has run since the lease ran out: the check itself finds it out.
      expect(signal.aborted).toBe(true);
      expect(signal.reason).toBeInstanceOf(LockLostError);
      expect(() => signal.throwIfAborted()).toThrow(LockLostError);
      expect(lease.holdCount).toBe(0);
      expect(lost).toEqual(['expired']);
      await expect(lease.release()).rejects.toThrow(LockNotOwnedError);
    });
  });

  it('a release after close() says the client was closed', async () => {
    const locks: LockClient = suite.lockClient();
    const lease = await locks.lock('invoice:43').acquire();
    await locks.close();
    const error: unknown = await lease.release().catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(LockNotOwnedError);
    expect((error as Error).message).toMatch(/LockClient closed/);
  });

  it('a permit released by its id: its lease is lost at once, and its release says why', async () => {
    const locks = suite.lockClient();
    const semaphore = locks.permitSemaphore('crawler:example.com', { permits: 2 });
    const lease = await semaphore.acquire();
    expect(await semaphore.release(lease.permitId)).toBe(true);
    expect(lease.signal.aborted).toBe(true);
    const error: unknown = await lease.release().catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(LockNotOwnedError);
    expect((error as Error).message).toMatch(/released by its id/);
    expect((error as Error).message).not.toContain(lease.permitId);
  });
});
