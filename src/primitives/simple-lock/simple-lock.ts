import { randomBytes } from 'node:crypto';
import { LockHandle, plainLease, type Engine, type Lease } from '../../engine/index.js';
import { lockKey, simpleUnlockChannel } from '../../keys.js';
import { SIMPLE_LOCK_PROTOCOL } from './protocol.js';

/** A fresh random token per acquisition, as redis-py's Lock makes one: 128 bits, in hex. */
function newToken(): string {
  return randomBytes(16).toString('hex');
}

/**
 * The classic token lock: a string key holding a random token, taken with
 * `SET <key> <token> NX PX <lease>`, released only by the token's holder (compare-and-delete).
 * It is the layout redis-py's `Lock` and node-redlock use, so a latchkey service and a service
 * on those libraries exclude each other on one key. Not reentrant: taking it again from inside
 * its own `withLock` callback is refused. Renewed by the watchdog like every latchkey lock.
 * Get one from {@link LockClient.simpleLock}.
 *
 * Waiting: latchkey's own releases wake latchkey's waiters at once; other clients announce
 * nothing, so a waiter also re-checks by the holder's PTTL and at least every 250 ms.
 *
 * @example
 * ```ts
 * await locks.simpleLock('reports:nightly').withLock(async (lease) => {
 *   await buildNightlyReport({ signal: lease.signal });
 * });
 * ```
 */
export class SimpleLock extends LockHandle<Lease> {
  /** @internal Use {@link LockClient.simpleLock}. */
  constructor(engine: Engine, keyPrefix: string, name: string) {
    const key = lockKey(keyPrefix, name);
    super(
      engine,
      { name, key, channel: simpleUnlockChannel(key), protocol: SIMPLE_LOCK_PROTOCOL },
      { reentrant: false, field: newToken },
      plainLease,
    );
  }

  /** Whether the calling async context holds the lock through `withLock`. No round trip. */
  isHeldByCurrentContext(): boolean {
    this.engine.assertOpen();
    return this.heldByContext() === true;
  }
}
