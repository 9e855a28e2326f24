// One acquisition of a lock, over a fake host (no Redis): released once, and again only when Redis
// could not confirm the release; its hold count reads 0 once the lock is lost; its JSON and its
// `inspect` show the lock and the hold, never the owner's field; `await using` releases it.
import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { LockError, LockLostError, LockNotOwnedError } from '../../../src/errors.js';
import { Hold } from '../../../src/engine/holds/hold.js';
import { plainLease, type Lease, type LeaseHost } from '../../../src/engine/lease.js';
import type { Protocol } from '../../../src/engine/types.js';

const FIELD = 'c0ffee00-0000-4000-8000-000000000000:7';

class FakeHost implements LeaseHost {
  releases = 0;
  failures: Error[] = [];
  release(): Promise<void> {
    this.releases += 1;
    const failure = this.failures.shift();
    return failure === undefined ? Promise.resolve() : Promise.reject(failure);
  }
}

function lease(count = 2): { lease: Lease; hold: Hold; host: FakeHost } {
  const hold = new Hold(
    { name: 'orders', key: 'app:orders', channel: 'unlock:orders', protocol: {} as Protocol },
    FIELD,
    30_000,
    true,
  );
  hold.count = count;
  hold.extend(performance.now());
  const host = new FakeHost();
  return { lease: plainLease(hold, host), hold, host };
}

describe('Lease', () => {
  it('shows the lock and the hold count, and shares the hold signal', () => {
    const { lease: made, hold } = lease();
    expect([made.name, made.key, made.holdCount, made.released]).toEqual(['orders', 'app:orders', 2, false]);
    expect(made.signal).toBe(hold.signal);
  });

  it('releases once; a second release is refused without asking the host', async () => {
    const { lease: made, host } = lease();
    await made.release();
    expect(made.released).toBe(true);
    const again = await made.release().catch((error: unknown) => error);
    expect(again).toBeInstanceOf(LockNotOwnedError);
    expect((again as Error).message).toBe('This lease of lock "orders" was already released');
    expect(host.releases).toBe(1);
  });

  it('may be released again when Redis could not confirm the release, and not after any other failure', async () => {
    const { lease: unconfirmed, host } = lease();
    host.failures.push(
      new LockError('REDIS_ERROR', 'Redis failed while releasing lock "orders": connection reset'),
    );
    await expect(unconfirmed.release()).rejects.toBeInstanceOf(LockError);
    expect(unconfirmed.released).toBe(false);
    await unconfirmed.release();
    expect(host.releases).toBe(2);

    const { lease: refused, host: refusing } = lease();
    refusing.failures.push(new LockNotOwnedError('Lock "orders" is not held by this owner'));
    await expect(refused.release()).rejects.toBeInstanceOf(LockNotOwnedError);
    expect(refused.released).toBe(true);
  });

  it('reads a hold count of 0 once the lock is lost', () => {
    const { lease: made, hold } = lease();
    hold.lose(new LockLostError('Lock "orders" was lost', 'expired'));
    expect(made.holdCount).toBe(0);
    expect(made.toJSON()).toEqual({
      name: 'orders',
      key: 'app:orders',
      holdCount: 0,
      released: false,
      lost: true,
    });
  });

  it("never shows the owner's field in its JSON or its inspection", () => {
    const { lease: made } = lease();
    expect(made.toJSON()).toEqual({
      name: 'orders',
      key: 'app:orders',
      holdCount: 2,
      released: false,
      lost: false,
    });
    const shown = inspect(made, { depth: 5, showHidden: true });
    expect(shown).toContain('orders');
    expect(shown).not.toContain(FIELD);
    expect(JSON.stringify(made)).not.toContain(FIELD);
  });

  it('is released by `await using`, unless it was released already', async () => {
    const { lease: made, host } = lease();
    {
      await using scoped = made;
      expect(scoped.released).toBe(false);
    }
    expect(host.releases).toBe(1);
    await made[Symbol.asyncDispose]();
    expect(host.releases).toBe(1);
  });
});
