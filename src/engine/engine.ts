import { randomUUID } from 'node:crypto';
import type { EventEmitter } from 'eventemitter3';
import { ClientClosedError, ReplicationError } from '../errors.js';
import { requestKey } from '../keys.js';
import type { LockClientEvents } from '../options.js';
import type { RedisConnection } from '../redis/connection.js';
import { CommandTimeoutError } from '../scripts/runner.js';
import type { Acquirer } from './acquire/acquire.js';
import { redisError, type Calls, type Synced } from './calls.js';
import { failedAfter, type Condition } from './condition.js';
import { ConditionWaits } from './condition-waits.js';
import type { ConditionTelemetry } from './condition-telemetry.js';
import { Events } from './events.js';
import type { Holds } from './holds/holds.js';
import type { Lease, LeaseFactory } from './lease.js';
import type { Notifications } from './wait/channels.js';
import type { Reachability } from './reachability.js';
import type { ServerCheck } from './server-check.js';
import type { ScriptCall, Target } from './types.js';
import { wireParts, type EngineSettings } from './wiring.js';

/**
 * What every kind of lock shares, knowing no kind by name: the wait loop, holds and leases, the
 * watchdog, notifications and idempotent calls. It holds those parts (built and wired to one
 * another in wiring.ts), offers their operations to a kind's handle and closes them in order.
 * @internal
 */
export class Engine {
  /** Secret: part of every owner field. Never shown in a message, an event or a log line. */
  readonly clientId = randomUUID();
  readonly #redis: RedisConnection;
  readonly #events: Events;
  readonly #calls: Calls;
  readonly #holds: Holds;
  readonly #notifications: Notifications;
  readonly #acquirer: Acquirer;
  readonly #server: ServerCheck;
  readonly #reach: Reachability;
  /** What a semaphore's and a latch's calls report to OpenTelemetry. */
  readonly conditionTelemetry: ConditionTelemetry;
  #closed = false;
  #conditions: ConditionWaits | undefined;
  #closing: Promise<void> | undefined;

  constructor(redis: RedisConnection, emitter: EventEmitter<LockClientEvents>, settings: EngineSettings) {
    this.#redis = redis;
    this.#events = new Events(emitter);
    const parts = wireParts(redis, this.#events, settings, {
      isClosed: () => this.#closed,
      assertOpen: () => this.assertOpen(),
    });
    this.conditionTelemetry = parts.telemetry.conditions;
    this.#reach = parts.reach;
    this.#calls = parts.calls;
    this.#server = parts.server;
    this.#holds = parts.holds;
    this.#notifications = parts.notifications;
    this.#acquirer = parts.acquirer;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Whether the client is a Redis Cluster's (some names depend on it: see keys.ts). */
  get cluster(): boolean {
    return this.#redis.cluster === true;
  }

  assertOpen(): void {
    if (this.#closed) throw new ClientClosedError();
  }

  /**
   * See {@link Acquirer.acquire}. The first acquires of a client check the server's version
   * first, within their own bound: the wait and the deadline of every attempt count from the
   * start of the call, so the call still ends by `waitMs` plus one command timeout.
   */
  acquire<L extends Lease>(
    target: Target,
    field: string,
    waitMs: number,
    leaseMs: number | undefined,
    signal: AbortSignal | undefined,
    newLease: LeaseFactory<L>,
    throwOnTimeout = false,
  ): Promise<L | null> {
    if (this.#server.passed) {
      return this.#acquirer.acquire(target, field, waitMs, leaseMs, signal, newLease, throwOnTimeout);
    }
    const startedAt = performance.now();
    return this.#server.check(signal).then((unasked) => {
      this.#endIfUnanswered(unasked, startedAt, waitMs, `acquiring lock "${target.name}"`);
      return this.#acquirer.acquire(
        target,
        field,
        waitMs,
        leaseMs,
        signal,
        newLease,
        throwOnTimeout,
        startedAt,
      );
    });
  }

  /**
   * After a server check that could not ask: when Redis left it unanswered for a whole command
   * timeout and the call's wait has run out meanwhile, the call ends now with that failure. A try
   * sent now would get only what is left of the call's bound (`waitMs` + `commandTimeoutMs`),
   * down to a millisecond, and fail saying so.
   */
  #endIfUnanswered(unasked: unknown, startedAt: number, waitMs: number, doing: string): void {
    if (!(unasked instanceof CommandTimeoutError)) return;
    const waitedMs = performance.now() - startedAt;
    if (waitedMs < waitMs) return;
    throw redisError(unasked, `${doing} after ${Math.round(waitedMs)} ms`);
  }

  /** A plain read command, retried on transient failures. */
  command(args: string[], doing: string): Promise<unknown> {
    return this.#calls.command(args, doing);
  }

  /**
   * How many messages (and resubscriptions) `channel` has seen while subscribed: a change between
   * two readings means something was announced on it meanwhile. Undefined while it is not
   * subscribed.
   */
  heardOn(channel: string): number | undefined {
    return this.#notifications.generationOf(channel);
  }

  /**
   * Waits for a condition that is not a hold (see {@link ConditionWaits}), in the one wait loop.
   * Like {@link Engine.acquire}, it checks the server's version first, within its bound.
   */
  waitFor<T, R = T | null>(
    condition: Condition<T, R>,
    waitMs: number,
    signal: AbortSignal | undefined,
  ): Promise<R> {
    const conditions = (this.#conditions ??= new ConditionWaits(
      this.#notifications,
      this.conditionTelemetry,
      this,
    ));
    // A wait aborted before it starts sends nothing, not even the server check, as an acquire.
    if (!this.#closed && signal?.aborted === true) return Promise.reject(signal.reason as Error);
    const startedAt = performance.now();
    // The wait's own failures say how long it waited (see failedAfter); so do the check's.
    if (this.#server.passed) return conditions.wait(condition, waitMs, signal, startedAt);
    return this.#server.check(signal).then(
      (unasked) => {
        try {
          this.#endIfUnanswered(unasked, startedAt, waitMs, `waiting for ${condition.what}`);
        } catch (error) {
          throw failedAfter(error, `waiting for ${condition.what}`, startedAt);
        }
        return conditions.wait(condition, waitMs, signal, startedAt);
      },
      (error: unknown) => {
        throw failedAfter(error, `waiting for ${condition.what}`, startedAt);
      },
    );
  }

  /**
   * Runs a script whose every call is safe to repeat (its request key makes it so), retrying
   * transient failures until `until` (monotonic ms; default: a few tries). Failures of Redis
   * reject with a {@link LockError} `REDIS_ERROR` that says what was being done. Resolves with
   * the raw reply, as {@link Engine.syncedCall} does: the caller reads it through `call.decode`
   * (`Writes` does, for a synchronizer's writes).
   */
  async call(call: ScriptCall, doing: string, until?: number): Promise<unknown> {
    this.assertOpen();
    if (!this.#server.passed) await this.#server.check(undefined);
    try {
      return await this.#calls.idempotent(
        call,
        (attempt) => (until === undefined ? attempt < 3 : performance.now() < until),
        until === undefined ? Number.POSITIVE_INFINITY : until + this.#calls.timeoutMs,
      );
    } catch (error) {
      throw redisError(error, doing);
    }
  }

  /**
   * {@link Engine.call} for a write that must reach replicas (`syncReplicas`): the wait command
   * goes right behind each try, and the call resolves with the script's reply and how many
   * replicas acknowledged it (`Infinity` without `syncReplicas`). See {@link Engine.shortfall}.
   */
  async syncedCall(call: ScriptCall, doing: string, until?: number): Promise<Synced> {
    this.assertOpen();
    if (!this.#server.passed) await this.#server.check(undefined);
    try {
      return await this.#calls.synced(
        call,
        (attempt) => (until === undefined ? attempt < 3 : performance.now() < until),
        until === undefined ? Number.POSITIVE_INFINITY : until + this.#calls.timeoutMs,
      );
    } catch (error) {
      throw redisError(error, doing);
    }
  }

  /**
   * With `syncReplicas`, the {@link ReplicationError} for a write only `acknowledged` replicas
   * confirmed, when that is fewer than required; undefined when enough did (or it is off).
   * `done` says what was written, as the start of a sentence: `Semaphore "a" was released`.
   */
  shortfall(acknowledged: number, done: string): ReplicationError | undefined {
    const replication = this.#calls.replication;
    if (replication === undefined || acknowledged >= replication.count) return undefined;
    return new ReplicationError(
      `${done} but only ${acknowledged} of the ${replication.count} replicas required acknowledged it within ${replication.timeoutMs} ms`,
      acknowledged,
      replication.count,
    );
  }

  /** Reports a failure nobody awaits (a write that cannot be undone fell short) on `error`. */
  reportError(error: Error): void {
    this.#events.error(error);
  }

  /** A fresh request key beside `key`, for a script call that must take effect once. */
  requestKey(key: string): string {
    return requestKey(key, this.#calls.nextRequestId());
  }

  /** How long one Redis call may take, in milliseconds. */
  get commandTimeoutMs(): number {
    return this.#calls.timeoutMs;
  }

  /**
   * The hold of `field` on `key` was given up by another path (a permit released by its id): a
   * lease of it in this client is told at once rather than at its next renewal.
   */
  releasedElsewhere(key: string, field: string, message: string): void {
    this.#holds.releasedElsewhere(key, field, message);
  }

  async forceUnlock(target: Target): Promise<boolean> {
    this.assertOpen();
    if (!this.#server.passed) await this.#server.check(undefined);
    return this.#holds.forceUnlock(target);
  }

  /**
   * Stops the watchdog, gives up every hold (one try each) and closes the subscriber; waiting
   * acquires reject with ClientClosedError.
   */
  close(): Promise<void> {
    // Every call resolves when the one close is done, and nothing is emitted after that.
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#closed = true;
    this.#reach.close();
    try {
      await Promise.all([this.#holds.closeAll(), this.#notifications.close()]);
    } finally {
      this.#events.mute();
    }
  }
}
