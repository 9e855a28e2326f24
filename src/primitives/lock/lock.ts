import {
  CONTEXT_OWNERS,
  hashHoldCount,
  LockHandle,
  plainLease,
  type Engine,
  type Lease,
  type Protocol,
} from '../../engine/index.js';
import { lockKey, ownerField, unlockChannel } from '../../keys.js';
import { reentrantProtocol } from './protocol.js';

const PROTOCOL: Protocol = reentrantProtocol(false);

/**
 * A distributed lock, reentrant by default, stored as Redisson's RLock stores it: a hash
 * `owner -> hold count` whose PTTL is the lease. Get one from {@link LockClient.lock}.
 *
 * The owner is the async context: everything awaited inside a {@link Lock.withLock} callback
 * shares it, so nested code re-enters the lock instead of waiting for itself. An acquisition
 * outside any `withLock` callback gets an owner of its own.
 *
 * @example
 * ```ts
 * const lock = locks.lock('invoice:42');
 * await lock.withLock(async (lease) => {
 *   await sendInvoice(42, { signal: lease.signal });
 * });
 * ```
 */
export class Lock extends LockHandle<Lease> {
  /** @internal Use {@link LockClient.lock}. */
  constructor(engine: Engine, keyPrefix: string, name: string, reentrant: boolean) {
    const key = lockKey(keyPrefix, name);
    super(
      engine,
      { name, key, channel: unlockChannel(key), protocol: PROTOCOL },
      reentrant ? CONTEXT_OWNERS.reentrant : CONTEXT_OWNERS.exclusive,
      plainLease,
    );
  }

  /**
   * How many times the calling async context holds the lock (0 when it does not). One round
   * trip for a reentrant lock; for a non-reentrant one, 1 or 0 from this client's own state.
   */
  holdCount(): Promise<number> {
    return hashHoldCount(this.engine, this.key, this.name, this.heldByContext(), (ownerId) =>
      ownerField(this.engine.clientId, ownerId),
    );
  }
}
