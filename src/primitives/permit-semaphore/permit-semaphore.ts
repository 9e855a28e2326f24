import { randomBytes } from 'node:crypto';
import { LockHandle, Writes, type Engine } from '../../engine/index.js';
import { InvalidArgumentError } from '../../errors.js';
import { lockKey, semaphoreChannel } from '../../keys.js';
import type { PermitSemaphoreOptions } from '../../options.js';
import { checkOptions, describe } from '../../validate.js';
import { PermitLease } from './permit-lease.js';
import {
  addPermitsCall,
  availableCall,
  initialArg,
  permitSemaphoreProtocol,
  releaseCall,
  trySetPermitsCall,
  type PermitCounts,
} from './protocol.js';

/** The largest count of permits: Redisson keeps the counter in a Java `int`. */
const MAX_PERMITS = 2_147_483_647;

/** A permit id as latchkey and Redisson make them: 16 random bytes, in hex. */
const PERMIT_ID = /^[0-9a-fA-F]{32}$/;

/** A fresh permit id per acquisition: 128 random bits, in hex, as Redisson's `generateId`. */
function newPermitId(): string {
  return randomBytes(16).toString('hex');
}

function checkPermits(what: string, value: unknown, min: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > MAX_PERMITS) {
    throw new InvalidArgumentError(
      `Expected \`${what}\` to be a whole number from ${min} to ${MAX_PERMITS}, got ${describe(value)}`,
    );
  }
  return value;
}

/** A change by `addPermits`: any whole number but 0, within the counter's range. */
function checkChange(value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value === 0 || Math.abs(value) > MAX_PERMITS) {
    throw new InvalidArgumentError(
      `Expected \`permits\` to be a whole number other than 0, from -${MAX_PERMITS} to ${MAX_PERMITS}, got ${describe(value)}`,
    );
  }
  return value;
}

/** Never shows the value: a near-miss of a permit id would still give most of a secret away. */
function checkPermitId(value: unknown): string {
  if (typeof value !== 'string') {
    throw new InvalidArgumentError(`Expected \`permitId\` to be a string, got ${describe(value)}`);
  }
  if (!PERMIT_ID.test(value)) {
    throw new InvalidArgumentError(
      `Expected \`permitId\` to be 32 hexadecimal digits (a PermitLease's permitId), got a string of length ${value.length} that is not`,
    );
  }
  return value;
}

/** What the semaphore's state looks like right now. */
/**
 * A crash-safe counting semaphore: `permits` permits, each taken under an id of its own with a
 * lease that the watchdog renews while its holder lives, so the permits of a holder that crashed
 * come back within one lease — the safety a plain counting semaphore lacks, whose permits leak
 * when a holder dies. Redisson's `RPermitExpirableSemaphore` layout, shared with Java services:
 * the counter of free permits at the key, the permits out in the sorted set `{<key>}:timeout`
 * (permit id -> end of its lease), and `redisson_sc:{<key>}` announcing the count of free permits.
 * Get one from {@link LockClient.permitSemaphore}.
 *
 * Each `acquire` takes one permit and resolves with a {@link PermitLease}, renewed by the watchdog
 * unless `leaseMs` is given; a permit that is lost (its lease ran out while its holder was stalled,
 * or it was released by id or force-released behind its holder's back) aborts the lease's signal
 * with a {@link LockLostError} and emits `lockLost`, as a lock's lease does. A permit is given back
 * by its lease, or by id from anywhere with {@link PermitSemaphore.release}.
 *
 * Leases are measured by Redis's clock (`TIME` inside every script). Redisson's own clients stamp
 * their permits with their machine's clock, so a deployment shared with Java services relies on
 * roughly synchronised clocks for the leases those set.
 *
 * Not reentrant: every acquire takes a permit of its own (one caller may hold several), but an
 * acquire of the same semaphore from inside its own `withLock` callback is refused with a
 * {@link LockReentryError}: with the permits run out it would wait for itself.
 *
 * @example
 * ```ts
 * const fetches = locks.permitSemaphore('crawler:example.com', { permits: 4 });
 * const page = await fetches.withLock(async (lease) => fetch(url, { signal: lease.signal }));
 * ```
 */
export class PermitSemaphore extends LockHandle<PermitLease> {
  readonly #initial: number | undefined;
  readonly #channel: string;
  readonly #writes: Writes;

  /** @internal Use {@link LockClient.permitSemaphore}. */
  constructor(engine: Engine, keyPrefix: string, name: string, options: PermitSemaphoreOptions | undefined) {
    const given = checkOptions('options', options, ['permits']);
    const initial = given.permits === undefined ? undefined : checkPermits('permits', given.permits, 1);
    const key = lockKey(keyPrefix, name);
    const channel = semaphoreChannel(key);
    super(
      engine,
      { name, key, channel, protocol: permitSemaphoreProtocol(initial) },
      { reentrant: false, field: newPermitId },
      (hold, host) => new PermitLease(hold, host),
    );
    this.#initial = initial;
    this.#channel = channel;
    this.#writes = new Writes(engine, key);
  }

  /**
   * Gives back the permit `permitId` (a {@link PermitLease.permitId}, handed to a job or another
   * process), whoever holds it. A lease in this or another process that still holds that permit
   * learns at its next renewal that it is gone (its signal aborts with a {@link LockLostError}).
   * Safe to retry: a retried call takes effect once.
   *
   * @returns whether the permit was out under that id and is now free; `false` when its lease had
   *   ended (it was given back then), it was released already, or the id is unknown.
   * @throws {@link InvalidArgumentError} for an id that is not 32 hex digits, before any command.
   * @example
   * ```ts
   * // In the worker that finished the job the permit was handed to:
   * await locks.permitSemaphore('crawler:example.com').release(job.permitId);
   * ```
   */
  async release(permitId: string): Promise<boolean> {
    const id = checkPermitId(permitId);
    this.engine.assertOpen();
    const outcome = await this.#writes.giving(
      (requestKey, recordTtlMs) => releaseCall(this.key, this.#channel, id, requestKey, recordTtlMs),
      `releasing a permit of semaphore "${this.name}"`,
      (given) => given === 'freed' && `A permit of semaphore "${this.name}" was released`,
    );
    const released = outcome === 'freed';
    if (released) {
      this.engine.releasedElsewhere(
        this.key,
        id,
        `The permit of semaphore "${this.name}" was released by its id`,
      );
    }
    return released;
  }

  /**
   * The number of permits free right now, after giving back the permits whose leases ended. For
   * a semaphore made with `permits` whose counter does not exist yet, that count (the counter is
   * created with it).
   * @example
   * ```ts
   * if ((await fetches.availablePermits()) === 0) metrics.increment('crawler.saturated');
   * ```
   */
  async availablePermits(): Promise<number> {
    return (await this.#counts()).free;
  }

  /**
   * Sets the number of permits if the semaphore has none set yet (its counter does not exist),
   * and wakes waiters. For a semaphore made without `permits`; one made with it sets its count on
   * first use.
   * @returns whether the count was set (`false`: the semaphore existed already; nothing changed).
   * @throws {@link InvalidArgumentError} unless `permits` is a whole number >= 0.
   * @example
   * ```ts
   * await locks.permitSemaphore('exports:pdf').trySetPermits(3);
   * ```
   */
  async trySetPermits(permits: number): Promise<boolean> {
    const count = checkPermits('permits', permits, 0);
    this.engine.assertOpen();
    return this.#writes.giving(
      (requestKey, recordTtlMs) =>
        trySetPermitsCall(
          this.key,
          this.#channel,
          { permits: count, initial: initialArg(this.#initial) },
          requestKey,
          recordTtlMs,
        ),
      `setting the permits of semaphore "${this.name}"`,
      (set) => set && `The permits of semaphore "${this.name}" were set`,
    );
  }

  /**
   * Adds `permits` permits (or takes them away, when negative: free permits go first, and the
   * count may go below 0, so that many permits given back are absorbed). Wakes waiters when permits
   * become free. Safe to retry: a retried call takes effect once.
   * @returns the number of free permits afterwards.
   * @throws {@link InvalidArgumentError} unless `permits` is a whole number other than 0.
   * @example
   * ```ts
   * await fetches.addPermits(2); // the host allowed more concurrent fetches
   * ```
   */
  async addPermits(permits: number): Promise<number> {
    const change = checkChange(permits);
    this.engine.assertOpen();
    return this.#writes.giving(
      (requestKey, recordTtlMs) =>
        addPermitsCall(
          this.key,
          this.#channel,
          { permits: change, initial: initialArg(this.#initial) },
          requestKey,
          recordTtlMs,
        ),
      `adding permits to semaphore "${this.name}"`,
      () => `${change} permit${Math.abs(change) === 1 ? ' was' : 's were'} added to semaphore "${this.name}"`,
    );
  }

  /**
   * Whether every permit is taken (an acquire would wait). One round trip; gives back the permits
   * whose leases ended first.
   */
  override async isLocked(): Promise<boolean> {
    return (await this.#counts()).free <= 0;
  }

  /**
   * Milliseconds until the earliest lease of the permits out ends unless renewed; `null` when no
   * permit is out; `Infinity` when the earliest never expires (a Redisson permit taken without a
   * lease). One round trip.
   */
  override async remainingTtlMs(): Promise<number | null> {
    const counts = await this.#counts();
    if (counts.out === 0) return null;
    return counts.untilEarliest < 0 ? Number.POSITIVE_INFINITY : counts.untilEarliest;
  }

  /**
   * Gives back every permit out, whoever holds it, and wakes waiters. Leases in this client are
   * told at once (their signals abort with reason `force-unlocked`); holders elsewhere at their
   * next renewal. Meant for operators and tests.
   * @returns whether any permit was out.
   */
  override forceUnlock(): Promise<boolean> {
    return super.forceUnlock();
  }

  async #counts(): Promise<PermitCounts> {
    this.engine.assertOpen();
    const call = availableCall(this.key, this.#channel, initialArg(this.#initial));
    return call.decode(await this.engine.call(call, `reading semaphore "${this.name}"`));
  }
}
