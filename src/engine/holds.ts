import {
  ClientClosedError,
  ReplicationError,
  LockError,
  LockLostError,
  LockNotOwnedError,
  type LockLostReason,
} from '../errors.js';
import { redisError, type Calls, type Synced } from './calls.js';
import { chainId, type OperationChains } from './chains.js';
import { toError, type Events } from './events.js';
import { lostRelease, type Hold } from './hold.js';
import type { Telemetry } from './telemetry.js';
import type { Protocol, ScriptCall, Target } from './types.js';
import { Watchdog } from './watchdog.js';

/**
 * Keys per renewal call: 100,000 held locks renew in 100 calls a renewal interval. One call of
 * 1,000 keys keeps Redis busy for one to two milliseconds (1.7 ms on a busy two-core machine):
 * the same Redis time as smaller calls in all, in fewer, slightly longer pauses for others.
 */
const RENEW_BATCH_SIZE = 1_000;

/** @internal */
export interface HoldsSettings {
  /** Lease of a hold the watchdog renews, in milliseconds. */
  readonly watchdogTimeoutMs: number;
  /** How long a watchdog-renewed hold may last before it is reported; 0: never. */
  readonly longHoldWarningMs: number;
  /** How long a last release is retried, in milliseconds. */
  readonly releaseRetryMs: number;
  readonly isClosed: () => boolean;
  readonly telemetry: Telemetry;
  /** On a Redis Cluster, the slot of a key: renewal batches are grouped by it. */
  readonly slotOf?: ((key: string) => number) | undefined;
}

/**
 * The holds of one client, by chain (lock key + owner): their release, renewal by the watchdog,
 * expiry by the monotonic clock, and loss.
 * @internal
 */
export class Holds {
  readonly #byChain = new Map<string, Hold>();
  readonly #calls: Calls;
  readonly #chains: OperationChains;
  readonly #events: Events;
  readonly #settings: HoldsSettings;
  readonly #watchdog: Watchdog;
  /** The warning about a Redis client closed under held locks goes out once per client. */
  #warnedClientClosed = false;
  /** The process warning about long holds goes out once per client. */
  #warnedLongHold = false;

  constructor(calls: Calls, chains: OperationChains, events: Events, settings: HoldsSettings) {
    this.#calls = calls;
    this.#chains = chains;
    this.#events = events;
    this.#settings = settings;
    const slotOf = settings.slotOf;
    this.#watchdog = new Watchdog(
      { renew: (holds) => this.#renewAll(holds), expire: (hold) => this.#expire(hold) },
      this.renewIntervalMs,
      RENEW_BATCH_SIZE,
      slotOf === undefined ? undefined : (hold) => slotOf(hold.target.key),
    );
  }

  /** How often the watchdog renews, in milliseconds. */
  get renewIntervalMs(): number {
    return Math.max(10, Math.floor(this.#settings.watchdogTimeoutMs / 3));
  }

  get(chain: string): Hold | undefined {
    return this.#byChain.get(chain);
  }

  has(chain: string): boolean {
    return this.#byChain.has(chain);
  }

  /**
   * A hold confirmed for the first time: kept, and renewed or watched for expiry. `now` is the
   * monotonic time, for a caller that has just read it.
   */
  add(hold: Hold, now = performance.now()): void {
    hold.acquiredAt = now;
    hold.onVerify = this.#verify;
    this.#byChain.set(hold.chain, hold);
    this.#watchdog.track(hold);
  }

  /**
   * A check of a hold through its lease: past its deadline, it is lost now, not when the expiry
   * timer gets to run. A hold whose last release is under way is left to that release, as the
   * watchdog leaves it.
   */
  readonly #verify = (hold: Hold): void => {
    if (hold.deadline > performance.now()) return;
    if (this.#byChain.get(hold.chain) !== hold || hold.count - hold.releasing <= 0) return;
    this.#expire(hold);
  };

  /** A hold whose lease was set again. */
  touched(hold: Hold): void {
    this.#watchdog.touched(hold);
  }

  release(hold: Hold): Promise<void> {
    const telemetry = this.#settings.telemetry;
    if (!telemetry.enabled) return this.#release(hold);
    return telemetry.release(hold, () => this.#release(hold));
  }

  #release(hold: Hold): Promise<void> {
    if (hold.lost) {
      return Promise.reject(lostRelease(hold));
    }
    hold.releasing += 1;
    if (hold.count - hold.releasing <= 0) {
      // The last hold is going: renewal stops now, not after the reply.
      this.#watchdog.untrack(hold);
    }
    // Nothing else of this owner in flight on the lock (the usual case): the call goes out at
    // once, before this returns.
    return this.#chains.run(hold.chain, () => this.#releaseNow(hold));
  }

  /** One release, its first try sent now; a failed one goes on as {@link Holds.#releaseRetried}. */
  #releaseNow(hold: Hold): Promise<void> {
    if (hold.lost) {
      hold.releasing -= 1;
      return Promise.reject(lostRelease(hold));
    }
    const expected = hold.count;
    const sentAt = performance.now();
    // A repeated last release that finds the owner's field gone within the lease finds what an
    // earlier copy did: the field cannot have expired yet.
    const repeated = expected === 1 && hold.releaseUnconfirmed;
    const call = hold.target.protocol.release(hold, expected);
    const calls = this.#calls;
    const retry = (error: unknown): Promise<void> =>
      this.#releaseRetried(hold, expected, sentAt, repeated, call, error);
    if (calls.replication === undefined) {
      return calls
        .once(call, calls.timeoutMs)
        .then(
          (reply) => this.#released(hold, expected, sentAt, repeated, reply, Number.POSITIVE_INFINITY),
          retry,
        );
    }
    return calls
      .onceSynced(call, calls.timeoutMs)
      .then(
        (synced) => this.#released(hold, expected, sentAt, repeated, synced.reply, synced.acknowledged),
        retry,
      );
  }

  /** A first try that failed: tried again while that is worth it, as any release call is. */
  async #releaseRetried(
    hold: Hold,
    expected: number,
    sentAt: number,
    wasRepeated: boolean,
    call: ScriptCall,
    error: unknown,
  ): Promise<void> {
    let repeated = wasRepeated;
    let synced: Synced;
    try {
      synced = await this.#calls.syncedRetry(
        error,
        call,
        this.#keepReleasing(hold, sentAt, () => (repeated = true)),
      );
    } catch (failure) {
      hold.releasing -= 1;
      this.#releaseFailed(hold, expected, failure);
    }
    this.#released(hold, expected, sentAt, repeated, synced.reply, synced.acknowledged);
  }

  /**
   * Whether a release call is worth another try: while the lock is known to be held. After
   * that it has expired anyway, and a missing field could no longer tell "released" from
   * "expired". Any try after the first is a repeat (`repeating`).
   */
  #keepReleasing(hold: Hold, sentAt: number, repeating: () => void): () => boolean {
    const retryUntil = Math.min(sentAt + this.#settings.releaseRetryMs, hold.validUntil);
    return () => {
      repeating();
      return !hold.lost && performance.now() < retryUntil;
    };
  }

  /** A release Redis did not confirm: throws what the caller sees. */
  #releaseFailed(hold: Hold, expected: number, error: unknown): never {
    if (hold.lost) {
      throw lostRelease(hold);
    }
    if (expected === 1) {
      // Unconfirmed last release: renewal is off, so the lock is gone when its lease ends.
      hold.releaseUnconfirmed = true;
      this.forget(hold);
    }
    throw redisError(error, `releasing lock "${hold.name}"`);
  }

  /**
   * What a release's reply says: the hold counted down or gone, or lost (throws). Ends the
   * release either way.
   */
  #released(
    hold: Hold,
    expected: number,
    sentAt: number,
    repeated: boolean,
    reply: unknown,
    acknowledged: number,
  ): void {
    try {
      const protocol = hold.target.protocol;
      const outcome = protocol.releaseOutcome(reply);
      if (outcome === undefined) {
        throw new LockError(
          'REDIS_ERROR',
          `Unexpected reply from the release script for lock "${hold.name}"`,
        );
      }
      if (outcome === 'absent') {
        if (!(repeated && expected === 1 && performance.now() < hold.validUntil)) {
          const message = `Lock "${hold.name}" is not held by this owner: it expired or was taken over`;
          this.markLost(hold, 'not-owner', message);
          throw new LockNotOwnedError(message, { cause: hold.lostError });
        }
      } else if (outcome === 'changed') {
        const message = `Lock "${hold.name}" is no longer held by this owner: its hold count changed behind its back`;
        this.markLost(hold, 'not-owner', message);
        throw new LockNotOwnedError(message, { cause: hold.lostError });
      }
      this.#reportUnreplicated(hold, acknowledged);
      hold.count = expected - 1;
      if (hold.count === 0) {
        this.forget(hold);
      } else {
        hold.extend(sentAt);
        this.#watchdog.track(hold);
      }
      if (this.#events.listening('released')) {
        this.#events.emit('released', { name: hold.name, key: hold.key, holdCount: hold.count });
      }
    } finally {
      hold.releasing -= 1;
    }
  }

  /**
   * With `syncReplicas`, a release (a free, or a hand-over to a waiter) that too few replicas
   * acknowledged. It cannot be undone: the caller gave the lock up, and a waiter may hold it
   * already. A failover before the replicas catch up may bring the old hold back until its lease
   * ends (the lock stays taken for nobody), or lose a hand-over (the new holder confirms its
   * grant with a WAIT of its own before it uses it). So the release resolves, and the shortfall
   * is reported on the `error` event.
   */
  #reportUnreplicated(hold: Hold, acknowledged: number): void {
    const required = this.#calls.replication?.count ?? 0;
    if (acknowledged >= required) return;
    this.#events.error(
      new ReplicationError(
        `Lock "${hold.name}" was released but only ${acknowledged} of the ${required} replicas required acknowledged the release in time`,
        acknowledged,
        required,
      ),
    );
  }

  /** Drops a hold that ended (released, or left to expire) without declaring it lost. */
  forget(hold: Hold): void {
    this.#settings.telemetry.ended(hold);
    this.#watchdog.untrack(hold);
    hold.onVerify = undefined;
    if (this.#byChain.get(hold.chain) === hold) this.#byChain.delete(hold.chain);
  }

  /**
   * Declares a hold lost: aborts its signal, stops renewal, emits `lockLost`. Returns the
   * hold's LockLostError (the first one, if it was lost already). Never throws.
   */
  markLost(hold: Hold, reason: LockLostReason, message: string): LockLostError {
    if (hold.lostError !== undefined) return hold.lostError;
    const error = new LockLostError(message, reason);
    this.#settings.telemetry.lost(hold, reason);
    this.forget(hold);
    hold.lose(error);
    this.#events.emit('lockLost', { name: hold.name, key: hold.key, error });
    return error;
  }

  /** A hold given up by another path (a permit released by its id) is lost now. */
  releasedElsewhere(key: string, field: string, message: string): void {
    const hold = this.#byChain.get(chainId(key, field));
    if (hold !== undefined) this.markLost(hold, 'not-owner', message);
  }

  /** Frees a lock whoever holds it; this client's holders of it are told at once. */
  async forceUnlock(target: Target): Promise<boolean> {
    if (this.#settings.isClosed()) throw new ClientClosedError();
    let reply: unknown;
    try {
      reply = await this.#calls.idempotent(target.protocol.forceRelease(target), (attempt) => attempt < 3);
    } catch (error) {
      throw redisError(error, `force-unlocking lock "${target.name}"`);
    }
    for (const hold of [...this.#byChain.values()]) {
      if (hold.key === target.key) {
        this.markLost(hold, 'force-unlocked', `Lock "${hold.name}" was force-unlocked`);
      }
    }
    return Number(reply) === 1;
  }

  /** On close: stops renewal, declares every hold lost and drops it in Redis (one try each). */
  async closeAll(): Promise<void> {
    this.#watchdog.stop();
    const held = [...this.#byChain.values()];
    this.#byChain.clear();
    await Promise.all(
      held.map((hold) => {
        this.markLost(
          hold,
          'client-closed',
          `Lock "${hold.name}" was given up because its LockClient closed`,
        );
        return this.#calls
          .once(hold.target.protocol.abandon(hold), this.#calls.timeoutMs)
          .catch(() => undefined);
      }),
    );
  }

  /** Renews one watchdog batch: one call per kind in it. */
  async #renewAll(holds: readonly Hold[]): Promise<boolean> {
    if (this.#calls.connectionClosed) {
      this.#clientClosed();
      return true;
    }
    if (this.#settings.longHoldWarningMs > 0) this.#reportLongHolds(holds);
    const first = holds[0]?.target.protocol;
    if (holds.every((hold) => hold.target.protocol === first)) return this.#renew(holds);
    const byKind = new Map<Protocol, Hold[]>();
    for (const hold of holds) {
      const group = byKind.get(hold.target.protocol);
      if (group === undefined) byKind.set(hold.target.protocol, [hold]);
      else group.push(hold);
    }
    const results = await Promise.all([...byKind.values()].map((group) => this.#renew(group)));
    return results.every(Boolean);
  }

  async #renew(holds: readonly Hold[]): Promise<boolean> {
    const protocol = holds[0]?.target.protocol;
    if (protocol === undefined) return true;
    const sentAt = performance.now();
    let reply: unknown;
    let acknowledged: number;
    try {
      // No call may outlast the interval: the next one must go out in time.
      ({ reply, acknowledged } = await this.#calls.onceSynced(
        protocol.renew(holds, this.#settings.watchdogTimeoutMs),
        Math.min(this.#calls.timeoutMs, this.renewIntervalMs),
      ));
    } catch (error) {
      if (this.#settings.isClosed()) return true;
      this.#renewFailed(protocol, holds, toError(error));
      return false;
    }
    const renewed = protocol.renewOutcome(reply, holds.length);
    if (renewed === undefined) {
      this.#settings.telemetry.renewalFailed(protocol, holds.length);
      this.#events.error(new LockError('REDIS_ERROR', 'Unexpected reply from the renewal script'));
      return false;
    }
    // With syncReplicas, a renewal too few replicas acknowledged does not count: a failover
    // could bring back the lease it replaced, so the holder keeps reckoning with that one (it was
    // acknowledged) and the watchdog tries again soon. Holds the master no longer has are lost
    // all the same.
    const required = this.#calls.replication?.count ?? 0;
    const replicated = acknowledged >= required;
    if (!replicated) {
      this.#renewFailed(
        protocol,
        holds,
        new ReplicationError(
          `Only ${acknowledged} of the ${required} replicas required acknowledged a renewal in time`,
          acknowledged,
          required,
        ),
      );
    }
    holds.forEach((hold, index) => {
      if (hold.lost || this.#byChain.get(hold.chain) !== hold) return;
      if (renewed[index] === true) {
        if (!replicated) return;
        hold.extend(sentAt);
        this.#watchdog.touched(hold);
      } else if (hold.count - hold.releasing <= 0) {
        // Its last release is under way and may have run first (a renewal that met a flushed
        // script cache is sent again after it): that release's reply says what became of it.
        return;
      } else {
        this.markLost(hold, 'not-owner', `Lock "${hold.name}" was lost: it expired or was taken over`);
      }
    });
    return replicated;
  }

  /**
   * Counts and emits `renewFailed` for the holds of a failed renewal that are still held: one
   * declared lost while the call was under way was reported in `lockLost` and will not be retried.
   */
  #renewFailed(protocol: Protocol, holds: readonly Hold[], error: Error): void {
    const held = holds.filter((hold) => !hold.lost && this.#byChain.get(hold.chain) === hold);
    if (held.length === 0) return;
    this.#settings.telemetry.renewalFailed(protocol, held.length);
    this.#events.emit('renewFailed', {
      names: held.map((hold) => hold.name),
      error,
      retryInMs: this.#watchdog.retryDelayMs,
    });
  }

  /**
   * The user closed the Redis client while this client held locks, without closing the
   * LockClient first: nothing can renew or release them now, so they stay locked in Redis until
   * their leases end. Said loudly (an `error` event and a process warning, once), and every hold
   * is declared lost so its holder stops.
   */
  #clientClosed(): void {
    const held = [...this.#byChain.values()];
    if (held.length === 0) return;
    const longestMs = Math.max(
      ...held.map((hold) => Math.max(0, Math.round(hold.validUntil - performance.now()))),
    );
    const names = held.slice(0, 5).map((hold) => `"${hold.name}"`);
    if (held.length > names.length) names.push(`and ${held.length - names.length} more`);
    const message =
      `The Redis client given to this LockClient was closed while it held ${held.length} lock(s) (${names.join(', ')}): ` +
      `they stay locked in Redis until their leases end, within ${longestMs} ms. Close the LockClient first (await locks.close()), then the Redis client.`;
    for (const hold of held) {
      this.markLost(
        hold,
        'client-closed',
        `Lock "${hold.name}" was given up: the Redis client of its LockClient was closed`,
      );
    }
    if (this.#warnedClientClosed) return;
    this.#warnedClientClosed = true;
    this.#events.error(new ClientClosedError(message));
    process.emitWarning(`latchkey: ${message}`, { code: 'LATCHKEY_CLIENT_CLOSED' });
  }

  /**
   * A hold the watchdog has renewed for longer than `longHoldWarningMs` is reported once: an
   * acquisition nobody released is otherwise renewed for as long as the process lives.
   */
  #reportLongHolds(holds: readonly Hold[]): void {
    const now = performance.now();
    const limitMs = this.#settings.longHoldWarningMs;
    for (const hold of holds) {
      const heldMs = now - hold.acquiredAt;
      if (hold.reportedLong || hold.acquiredAt === 0 || heldMs < limitMs) continue;
      hold.reportedLong = true;
      this.#events.emit('leaseHeldLong', { name: hold.name, key: hold.key, heldMs: Math.round(heldMs) });
      if (!this.#warnedLongHold) {
        this.#warnedLongHold = true;
        process.emitWarning(
          `latchkey: lock "${hold.name}" has been held for ${Math.round(heldMs / 1_000)} s without a release, and the watchdog keeps renewing it; release every lease (or set longHoldWarningMs) — further long holds on this client are reported by the 'leaseHeldLong' event only`,
          { code: 'LATCHKEY_LONG_HOLD' },
        );
      }
    }
  }

  /** The client's clock says the lease ran out with no renewal confirmed. */
  #expire(hold: Hold): void {
    if (hold.lost) return;
    this.markLost(
      hold,
      'expired',
      `Lock "${hold.name}" was lost: no renewal was confirmed within its ${hold.ttlMs} ms lease`,
    );
    // Redis may still keep the field (a renewal may land late): drop it, after any request of
    // this owner already under way, so no stale hold lingers.
    void this.#chains.run(hold.chain, async () => {
      const giveUpAt = performance.now() + hold.ttlMs;
      try {
        await this.#calls.idempotent(
          hold.target.protocol.abandon(hold),
          () => !this.#settings.isClosed() && performance.now() < giveUpAt,
        );
      } catch {
        // Unreachable for a whole lease: the TTL has removed the field by now.
      }
    });
  }
}
