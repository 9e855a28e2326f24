import { hashHoldCount, Lease, LockHandle, type Engine, type Target } from '../../engine/index.js';
import { lockKey, ownerField, readWriteChannel, writerField } from '../../keys.js';
import { READ_PROTOCOL, WRITE_PROTOCOL } from './protocol.js';

function newLease(
  hold: ConstructorParameters<typeof Lease>[0],
  host: ConstructorParameters<typeof Lease>[1],
): Lease {
  return new Lease(hold, host);
}

/**
 * The read half of a {@link ReadWriteLock}: shared by any number of owners at once while no
 * writer holds the lock, reentrant, and open to the write lock's own holder (a downgrade: take
 * the read lock inside the write lock, then release the write lock, and go on reading). A new
 * reader waits while a latchkey writer waits (writer preference), so a stream of readers cannot
 * starve a writer; readers that already hold the read lock re-enter freely.
 *
 * @example
 * ```ts
 * const report = await locks.readWriteLock('report:daily').readLock().withLock(async () => {
 *   return loadReport('daily');
 * });
 * ```
 */
export class ReadLock extends LockHandle<Lease> {
  /** @internal Use {@link ReadWriteLock.readLock}. */
  constructor(engine: Engine, target: Omit<Target, 'protocol'>) {
    super(engine, { ...target, protocol: READ_PROTOCOL }, { reentrant: true, field: ownerField }, newLease);
  }

  /**
   * How many times the calling async context holds the read lock (0 when it does not). One
   * round trip.
   * @example
   * ```ts
   * const depth = await rw.readLock().holdCount();
   * ```
   */
  holdCount(): Promise<number> {
    return hashHoldCount(this.engine, this.key, this.name, this.heldByContext(), (ownerId) =>
      ownerField(this.engine.clientId, ownerId),
    );
  }
}

/**
 * The write half of a {@link ReadWriteLock}: one owner at a time, and no reader beside it but
 * its own (a downgrade), reentrant. Asking for it while holding only the read lock is an upgrade,
 * rejected at once with {@link LockUpgradeError} (it would wait for itself).
 *
 * @example
 * ```ts
 * await locks.readWriteLock('report:daily').writeLock().withLock(async (lease) => {
 *   await rebuildReport('daily', { signal: lease.signal });
 * });
 * ```
 */
export class WriteLock extends LockHandle<Lease> {
  /** @internal Use {@link ReadWriteLock.writeLock}. */
  constructor(engine: Engine, target: Omit<Target, 'protocol'>) {
    super(
      engine,
      { ...target, protocol: WRITE_PROTOCOL },
      { reentrant: true, field: (clientId, ownerId) => writerField(ownerField(clientId, ownerId)) },
      newLease,
    );
  }

  /**
   * How many times the calling async context holds the write lock (0 when it does not). One
   * round trip.
   * @example
   * ```ts
   * const depth = await rw.writeLock().holdCount();
   * ```
   */
  holdCount(): Promise<number> {
    return hashHoldCount(this.engine, this.key, this.name, this.heldByContext(), (ownerId) =>
      writerField(ownerField(this.engine.clientId, ownerId)),
    );
  }
}

/**
 * A distributed read-write lock — many readers or one writer — stored as Redisson's
 * RReadWriteLock stores it, so Java services on Redisson share it: one hash with a `mode` field,
 * reader and writer fields, a lease key per read hold, and the channel `redisson_rwlock:{<key>}`.
 * Get one from {@link LockClient.readWriteLock}; its {@link ReadWriteLock.readLock} and
 * {@link ReadWriteLock.writeLock} share the key and the channel.
 *
 * Both are reentrant; a writer may take the read lock and then release the write lock
 * (downgrade); a reader asking for the write lock is rejected with {@link LockUpgradeError}. The
 * watchdog renews readers and writers alike.
 *
 * @example
 * ```ts
 * const rw = locks.readWriteLock('price-list');
 * const prices = await rw.readLock().withLock(() => readPrices());
 * await rw.writeLock().withLock(() => publishPrices(next));
 * ```
 */
export class ReadWriteLock {
  readonly #read: ReadLock;
  readonly #write: WriteLock;

  /** @internal Use {@link LockClient.readWriteLock}. */
  constructor(engine: Engine, keyPrefix: string, name: string) {
    const key = lockKey(keyPrefix, name);
    const target = { name, key, channel: readWriteChannel(key) };
    this.#read = new ReadLock(engine, target);
    this.#write = new WriteLock(engine, target);
  }

  /** The lock's name. */
  get name(): string {
    return this.#read.name;
  }

  /** The lock's Redis key (`keyPrefix + name`), shared by both halves. */
  get key(): string {
    return this.#read.key;
  }

  /**
   * Deletes the lock whoever holds it, readers or writer, and wakes every waiter. Holders in this
   * client are told at once (their signals abort with reason `force-unlocked`); holders elsewhere
   * at their next renewal. Readers' lease keys are left to expire within their lease: without
   * the hash they grant nothing. Meant for operators and tests, not for normal release.
   * @returns whether there was a lock to delete.
   * @example
   * ```ts
   * await locks.readWriteLock('catalog').forceUnlock();
   * ```
   */
  forceUnlock(): Promise<boolean> {
    return this.#read.forceUnlock();
  }

  /**
   * The read lock: shared among readers. The same handle on every call.
   * @example
   * ```ts
   * await using lease = await locks.readWriteLock('catalog').readLock().acquire();
   * ```
   */
  readLock(): ReadLock {
    return this.#read;
  }

  /**
   * The write lock: exclusive. The same handle on every call.
   * @example
   * ```ts
   * await using lease = await locks.readWriteLock('catalog').writeLock().acquire({ waitMs: 5_000 });
   * ```
   */
  writeLock(): WriteLock {
    return this.#write;
  }
}
