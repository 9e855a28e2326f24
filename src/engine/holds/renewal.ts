import { ReplicationError, type LockLostError, type LockLostReason } from '../../errors.js';
import type { Calls } from '../calls.js';
import { toError, type Events } from '../events.js';
import type { Telemetry } from '../telemetry.js';
import type { Protocol } from '../types.js';
import type { Hold } from './hold.js';
import type { Watchdog } from './watchdog.js';

/**
 * Keys per renewal call: 100,000 held locks renew in 100 calls a renewal interval. One call of
 * 1,000 keys keeps Redis busy for one to two milliseconds (1.7 ms on a busy two-core machine):
 * the same Redis time as smaller calls in all, in fewer, slightly longer pauses for others.
 */
export const RENEW_BATCH_SIZE = 1_000;

/** The parts of the engine a renewal works with. @internal */
export interface RenewalParts {
  readonly calls: Calls;
  readonly events: Events;
  readonly watchdog: Watchdog;
  readonly telemetry: Telemetry;
  /** Lease of a hold the watchdog renews, in milliseconds. */
  readonly watchdogTimeoutMs: number;
  /** How often the watchdog renews, in milliseconds. */
  readonly renewIntervalMs: number;
  /** How long a watchdog-renewed hold may last before it is reported; 0: never. */
  readonly longHoldWarningMs: number;
  readonly isClosed: () => boolean;
}

/** What a renewal needs of the holds it renews. @internal */
export interface RenewedHolds {
  get(chain: string): Hold | undefined;
  markLost(hold: Hold, reason: LockLostReason, message: string): LockLostError;
  /** The Redis client was closed under held locks. */
  clientClosed(): void;
}

/**
 * The watchdog's renewals: one call per kind (and, on a Redis Cluster, per slot) for a batch of
 * holds, counted only with the replicas' acknowledgement under `syncReplicas`; and the report of
 * a hold renewed for longer than `longHoldWarningMs`.
 * @internal
 */
export class Renewal {
  readonly #parts: RenewalParts;
  readonly #holds: RenewedHolds;
  /** The process warning about long holds goes out once per client. */
  #warnedLongHold = false;

  constructor(parts: RenewalParts, holds: RenewedHolds) {
    this.#parts = parts;
    this.#holds = holds;
  }

  /** Renews one watchdog batch: one call per kind in it. */
  async renewAll(holds: readonly Hold[]): Promise<boolean> {
    if (this.#parts.calls.connectionClosed) {
      this.#holds.clientClosed();
      return true;
    }
    if (this.#parts.longHoldWarningMs > 0) this.#reportLongHolds(holds);
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
    const call = protocol.renew(holds, this.#parts.watchdogTimeoutMs);
    let reply: unknown;
    let acknowledged: number;
    try {
      // No call may outlast the interval: the next one must go out in time.
      ({ reply, acknowledged } = await this.#parts.calls.once(
        call,
        Math.min(this.#parts.calls.timeoutMs, this.#parts.renewIntervalMs),
      ));
    } catch (error) {
      if (this.#parts.isClosed()) return true;
      this.#renewFailed(protocol, holds, toError(error));
      return false;
    }
    let renewed: readonly boolean[];
    try {
      renewed = call.decode(reply);
    } catch (error) {
      this.#parts.telemetry.renewalFailed(protocol, holds.length);
      this.#parts.events.error(toError(error));
      return false;
    }
    // With syncReplicas, a renewal too few replicas acknowledged does not count: a failover
    // could bring back the lease it replaced, so the holder keeps reckoning with that one (it was
    // acknowledged) and the watchdog tries again soon. Holds the master no longer has are lost
    // all the same.
    const required = this.#parts.calls.replication?.count ?? 0;
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
    this.#renewed(holds, renewed, replicated, sentAt);
    return replicated;
  }

  /**
   * What a renewal's reply says of each hold: renewed (counted only if `replicated`), or no
   * longer held.
   */
  #renewed(holds: readonly Hold[], renewed: readonly boolean[], replicated: boolean, sentAt: number): void {
    holds.forEach((hold, index) => {
      if (hold.lost || this.#holds.get(hold.chain) !== hold) return;
      if (renewed[index] === true) {
        if (!replicated) return;
        hold.extend(sentAt);
        this.#parts.watchdog.touched(hold);
      } else if (hold.count - hold.releasing <= 0) {
        // Its last release is under way and may have run first (a renewal that met a flushed
        // script cache is sent again after it): that release's reply says what became of it.
        return;
      } else {
        this.#holds.markLost(hold, 'not-owner', `Lock "${hold.name}" was lost: it expired or was taken over`);
      }
    });
  }

  /**
   * Counts and emits `renewFailed` for the holds of a failed renewal that are still held: one
   * declared lost while the call was under way was reported in `lockLost` and will not be retried.
   */
  #renewFailed(protocol: Protocol, holds: readonly Hold[], error: Error): void {
    const held = holds.filter((hold) => !hold.lost && this.#holds.get(hold.chain) === hold);
    if (held.length === 0) return;
    this.#parts.telemetry.renewalFailed(protocol, held.length);
    this.#parts.events.emit('renewFailed', {
      names: held.map((hold) => hold.name),
      error,
      retryInMs: this.#parts.watchdog.retryDelayMs,
    });
  }

  /**
   * A hold the watchdog has renewed for longer than `longHoldWarningMs` is reported once: an
   * acquisition nobody released is otherwise renewed for as long as the process lives.
   */
  #reportLongHolds(holds: readonly Hold[]): void {
    const now = performance.now();
    const limitMs = this.#parts.longHoldWarningMs;
    for (const hold of holds) {
      const heldMs = now - hold.acquiredAt;
      if (hold.reportedLong || hold.acquiredAt === 0 || heldMs < limitMs) continue;
      hold.reportedLong = true;
      this.#parts.events.emit('leaseHeldLong', {
        name: hold.name,
        key: hold.key,
        heldMs: Math.round(heldMs),
      });
      if (!this.#warnedLongHold) {
        this.#warnedLongHold = true;
        process.emitWarning(
          `latchkey: lock "${hold.name}" has been held for ${Math.round(heldMs / 1_000)} s without a release, and the watchdog keeps renewing it; release every lease (or set longHoldWarningMs) — further long holds on this client are reported by the 'leaseHeldLong' event only`,
          { code: 'LATCHKEY_LONG_HOLD' },
        );
      }
    }
  }
}
