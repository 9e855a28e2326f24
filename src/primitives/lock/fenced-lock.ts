import {
  CONTEXT_OWNERS,
  hashHoldCount,
  LockHandle,
  type Engine,
  type Hold,
  type LeaseHost,
  type Protocol,
} from '../../engine/index.js';
import { LockError } from '../../errors.js';
import { fencingTokenKey, lockKey, ownerField, unlockChannel } from '../../keys.js';
import { FencedLease } from './fenced-lease.js';
import { reentrantProtocol } from './protocol.js';

const PROTOCOL: Protocol = reentrantProtocol(true);

/** Every fenced acquisition carries its token: from the acquire reply, or from the hand-over. */
function fencedLease(hold: Hold, host: LeaseHost, proof: string | undefined): FencedLease {
  if (proof === undefined || !/^[1-9][0-9]*$/.test(proof)) {
    throw new LockError('REDIS_ERROR', `Lock "${hold.name}" was acquired without a fencing token`);
  }
  return new FencedLease(hold, host, BigInt(proof));
}

/**
 * A reentrant lock whose every acquisition comes with a fencing token: a number that grows with
 * each acquisition (re-entries and hand-overs included) and never goes back. A resource that
 * refuses tokens smaller than the largest it has seen refuses a holder that lost the lock while
 * it was paused — the one failure a lease alone cannot prevent. Redisson's RFencedLock layout:
 * the lock hash `<key>` plus the counter `redisson_lock_token:{<key>}`. Get one from
 * {@link LockClient.fencedLock}.
 *
 * @example
 * ```ts
 * await locks.fencedLock('ledger:7').withLock(async (lease) => {
 *   await ledger.append(entry, { fencingToken: lease.token });
 * });
 * ```
 */
export class FencedLock extends LockHandle<FencedLease> {
  readonly #tokenKey: string;

  /** @internal Use {@link LockClient.fencedLock}. */
  constructor(engine: Engine, keyPrefix: string, name: string, reentrant: boolean) {
    const key = lockKey(keyPrefix, name);
    super(
      engine,
      { name, key, channel: unlockChannel(key), protocol: PROTOCOL },
      reentrant ? CONTEXT_OWNERS.reentrant : CONTEXT_OWNERS.exclusive,
      fencedLease,
    );
    this.#tokenKey = fencingTokenKey(key);
  }

  /** How many times the calling async context holds the lock (0 when it does not). */
  holdCount(): Promise<number> {
    return hashHoldCount(this.engine, this.key, this.name, this.heldByContext(), (ownerId) =>
      ownerField(this.engine.clientId, ownerId),
    );
  }

  /** The last fencing token issued for this lock, `null` if none ever was. One round trip. */
  async currentToken(): Promise<bigint | null> {
    const reply = await this.engine.command(
      ['GET', this.#tokenKey],
      `reading the token of lock "${this.name}"`,
    );
    if (reply === null || reply === undefined) return null;
    if (typeof reply !== 'string' && typeof reply !== 'number') {
      throw new LockError('REDIS_ERROR', `Unexpected reply reading the token of lock "${this.name}"`);
    }
    return BigInt(reply);
  }
}
