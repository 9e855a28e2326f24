import type { Engine } from '../../engine/engine.js';
import { LockHandle } from '../../engine/handle.js';
import { Lease } from '../../engine/lease.js';
import type { Protocol } from '../../engine/types.js';
import { lockKey, ownerField, unlockChannel } from '../../keys.js';
import { currentContext } from '../../owner.js';
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
      { reentrant, field: ownerField },
      (hold, host) => new Lease(hold, host),
    );
  }

  /**
   * How many times the calling async context holds the lock (0 when it does not). One round
   * trip for a reentrant lock; for a non-reentrant one, 1 or 0 from this client's own state.
   */
  holdCount(): Promise<number> {
    return reentrantHoldCount(this.engine, this.key, this.name, this.heldByContext());
  }
}

/** @internal {@link Lock.holdCount}, shared with the fenced lock of the same family. */
export async function reentrantHoldCount(
  engine: Engine,
  key: string,
  name: string,
  heldByContext: boolean | undefined,
): Promise<number> {
  engine.assertOpen();
  const context = currentContext();
  if (context === undefined) return 0;
  if (heldByContext !== undefined) return heldByContext ? 1 : 0;
  const field = ownerField(engine.clientId, context.ownerId);
  const reply = await engine.command(['HGET', key, field], `reading lock "${name}"`);
  return reply === null || reply === undefined ? 0 : Number(reply);
}
