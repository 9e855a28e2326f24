import { ClientClosedError, LockLostError, type LockLostReason } from '../../errors.js';
import { redisError, type Calls } from '../calls.js';
import { chainId, type OperationChains } from '../chains.js';
import type { Events } from '../events.js';
import type { Telemetry } from '../telemetry.js';
import type { Target } from '../types.js';
import type { Hold } from './hold.js';
import { Releases } from './release.js';
import { RENEW_BATCH_SIZE, Renewal } from './renewal.js';
import { Watchdog } from './watchdog.js';

/** For a call tried once. */
const NO_RETRY = (): boolean => false;

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
  readonly #releases: Releases;
  readonly #renewal: Renewal;
  /** The warning about a Redis client closed under held locks goes out once per client. */
  #warnedClientClosed = false;

  constructor(calls: Calls, chains: OperationChains, events: Events, settings: HoldsSettings) {
    this.#calls = calls;
    this.#chains = chains;
    this.#events = events;
    this.#settings = settings;
    const slotOf = settings.slotOf;
    this.#watchdog = new Watchdog(
      { renew: (holds) => this.#renewal.renewAll(holds), expire: (hold) => this.#expire(hold) },
      this.renewIntervalMs,
      RENEW_BATCH_SIZE,
      slotOf === undefined ? undefined : (hold) => slotOf(hold.target.key),
    );
    const { telemetry } = settings;
    this.#releases = new Releases(
      { calls, chains, events, watchdog: this.#watchdog, telemetry, releaseRetryMs: settings.releaseRetryMs },
      this,
    );
    this.#renewal = new Renewal(
      {
        calls,
        events,
        watchdog: this.#watchdog,
        telemetry,
        watchdogTimeoutMs: settings.watchdogTimeoutMs,
        renewIntervalMs: this.renewIntervalMs,
        longHoldWarningMs: settings.longHoldWarningMs,
        isClosed: settings.isClosed,
      },
      this,
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

  /** See {@link Releases}. */
  release(hold: Hold): Promise<void> {
    return this.#releases.release(hold);
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
    const call = target.protocol.forceRelease(target);
    let reply: unknown;
    try {
      reply = await this.#calls.idempotent(call, (attempt) => attempt < 3);
    } catch (error) {
      throw redisError(error, `force-unlocking lock "${target.name}"`);
    }
    for (const hold of [...this.#byChain.values()]) {
      if (hold.key === target.key) {
        this.markLost(hold, 'force-unlocked', `Lock "${hold.name}" was force-unlocked`);
      }
    }
    return call.decode(reply);
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
        // One try, and no wait for replicas: the client is closing.
        return this.#calls.idempotent(hold.target.protocol.abandon(hold), NO_RETRY).catch(() => undefined);
      }),
    );
  }

  /**
   * The user closed the Redis client while this client held locks, without closing the
   * LockClient first: nothing can renew or release them now, so they stay locked in Redis until
   * their leases end. Said loudly (an `error` event and a process warning, once), and every hold
   * is declared lost so its holder stops.
   */
  clientClosed(): void {
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
