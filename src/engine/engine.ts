import { randomBytes, randomUUID } from 'node:crypto';
import type { EventEmitter } from 'eventemitter3';
import { ClientClosedError, LockError, ReplicationError } from '../errors.js';
import { grantChannel, isCompanionKey, requestKey } from '../keys.js';
import type { LockClientEvents } from '../options.js';
import type { RedisConnection, Subscriber } from '../redis/connection.js';
import { isServerReply } from '../redis/replies.js';
import { keySlot } from '../redis/slot.js';
import { CommandTimeoutError, ScriptRunner } from '../scripts/runner.js';
import { Acquirer } from './acquire/acquire.js';
import { Calls, redisError, type Synced } from './calls.js';
import { waitFor, type Condition } from './condition.js';
import type { ConditionTelemetry } from './condition-telemetry.js';
import { OperationChains } from './chains.js';
import { Events } from './events.js';
import { Holds } from './holds/holds.js';
import type { Lease, LeaseFactory } from './lease.js';
import { Notifications } from './wait/channels.js';
import { openSubscriber } from './wait/subscriber.js';
import { Reachability } from './reachability.js';
import { createTelemetry, NO_TELEMETRY, openTelemetry } from './telemetry.js';
import { Replication, type ReplicationSettings } from './replication.js';
import { ServerCheck } from './server-check.js';
import type { ScriptCall, Target } from './types.js';

/**
 * A wait's failure of Redis, saying how long the caller waited: a call that gives up says its own
 * time, not only that of its last try. Anything else (an abort's reason, a closed client, a kind's
 * own error) as it is.
 */
function failedAfter(error: unknown, doing: string, startedAt: number): unknown {
  if (!(error instanceof LockError) || error.code !== 'REDIS_ERROR' || !(error.cause instanceof Error)) {
    return error;
  }
  return redisError(error.cause, `${doing} after ${Math.round(performance.now() - startedAt)} ms`);
}

/**
 * How long a last release is retried: twice the command timeout, within these bounds. Its
 * request key is kept that long plus the command timeout plus 2 s, so any copy of the call
 * still finds it; short, as every last release writes one.
 */
const RELEASE_RETRY_MIN_MS = 1_000;
const RELEASE_RETRY_MAX_MS = 8_000;

/** The engine's settings, validated by the client. @internal */
export interface EngineSettings {
  readonly watchdogTimeoutMs: number;
  readonly commandTimeoutMs: number;
  readonly subscriptionLingerMs: number;
  /** See LockClientOptions.longHoldWarningMs; 0: off. */
  readonly longHoldWarningMs: number;
  /** Report to `@opentelemetry/api`'s global providers, if the API is installed. */
  readonly telemetry: boolean;
  /** Replicas that must acknowledge each grant; undefined: none. */
  readonly syncReplicas?: ReplicationSettings | undefined;
  /** Prepended to every name to form its key: events name the lock of a key by it. */
  readonly keyPrefix?: string;
  /**
   * Report Redis going unanswered (`redisUnreachable`, `redisReachable`, a process warning): a
   * LockClient's engine does; a Redlock master's leaves its health to the quorum.
   */
  readonly reportUnreachable?: boolean;
}

/**
 * What every kind of lock shares, knowing no kind by name: the wait loop, holds and leases, the
 * watchdog, notifications and idempotent calls. The composition root of those parts, and what a
 * kind's handle talks to.
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
  #closing: Promise<void> | undefined;

  constructor(redis: RedisConnection, emitter: EventEmitter<LockClientEvents>, settings: EngineSettings) {
    this.#redis = redis;
    this.#events = new Events(emitter);
    const telemetry = settings.telemetry ? createTelemetry(openTelemetry()) : NO_TELEMETRY;
    this.conditionTelemetry = telemetry.conditions;
    const isClosed = (): boolean => this.#closed;
    const assertOpen = (): void => this.assertOpen();
    const runner = new ScriptRunner(redis, settings.commandTimeoutMs);
    const keyPrefix = settings.keyPrefix ?? '';
    this.#reach = new Reachability(
      {
        thresholdMs: settings.commandTimeoutMs,
        report: settings.reportUnreachable === true,
        nameOf: (key) =>
          key.startsWith(keyPrefix) && !isCompanionKey(key) ? key.slice(keyPrefix.length) : undefined,
      },
      this.#events,
    );
    this.#calls = new Calls(
      runner,
      settings.commandTimeoutMs,
      isClosed,
      this.#reach,
      settings.syncReplicas === undefined ? undefined : new Replication(settings.syncReplicas, runner),
    );
    /** Public: names this client's grant channel and prefixes its tickets. */
    const grants = grantChannel(randomBytes(8).toString('hex'));
    // On a cluster the grant channel lies in another slot than the lock: no hand-overs there.
    const handOver = redis.cluster !== true;
    this.#server = new ServerCheck(this.#calls, () => {
      if (handOver) this.#checkHandOver(grants);
    });
    const chains = new OperationChains();
    this.#holds = new Holds(this.#calls, chains, this.#events, {
      watchdogTimeoutMs: settings.watchdogTimeoutMs,
      longHoldWarningMs: settings.longHoldWarningMs,
      releaseRetryMs: Math.min(
        RELEASE_RETRY_MAX_MS,
        Math.max(RELEASE_RETRY_MIN_MS, 2 * settings.commandTimeoutMs),
      ),
      isClosed,
      telemetry,
      slotOf: redis.cluster === true ? keySlot : undefined,
    });
    this.#notifications = new Notifications(
      {
        connect: () => this.#connectSubscriber(),
        grantChannel: grants,
        grantListener: () => this.#acquirer.onGrant,
        onError: (error) => this.#events.error(error),
        closedError: () => new ClientClosedError(),
      },
      settings.subscriptionLingerMs,
    );
    this.#acquirer = new Acquirer(
      {
        watchdogTimeoutMs: settings.watchdogTimeoutMs,
        grantChannel: grants,
        handOver,
        isClosed,
        assertOpen,
      },
      {
        calls: this.#calls,
        chains,
        holds: this.#holds,
        notifications: this.#notifications,
        events: this.#events,
        // A lease's release goes straight to the holds.
        leaseHost: this.#holds,
        telemetry,
      },
    );
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

  /**
   * Asks once whether Redis lets this client's user count a channel's subscribers (`PUBSUB
   * NUMSUB`), as a release does inside its script before it hands the lock to a waiter. A script
   * that is refused hands nothing over and frees the lock instead: still correct, but waiters
   * are no longer served in the order they came, and take longer. That degrades nothing a
   * caller sees fail, so the refusal is reported on the `error` event.
   */
  #checkHandOver(channel: string): void {
    this.#calls.command(['PUBSUB', 'NUMSUB', channel], 'checking that Redis allows hand-overs').then(
      () => undefined,
      (error: unknown) => {
        // Only a refusal by the server says anything; a lost connection or a close does not.
        const refusal = error instanceof LockError ? error.cause : error;
        if (!(refusal instanceof Error) || !isServerReply(refusal)) return;
        this.#events.error(
          new LockError(
            'REDIS_ERROR',
            `Redis refused PUBSUB NUMSUB to this client's user (${refusal.message}): its releases cannot hand a lock to a waiter, so they free it instead, and waiters take it when they hear it is free, not in the order they came. Allow the command (ACL: +pubsub|numsub) to keep hand-overs.`,
            { cause: refusal },
          ),
        );
      },
    );
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
   * Waits for a condition that is not a hold (permits of a semaphore, a latch at zero): see
   * {@link waitFor}. Like {@link Engine.acquire}, it checks the server's version first, within its
   * bound.
   */
  waitFor<T>(condition: Condition<T>, waitMs: number, signal: AbortSignal | undefined): Promise<T | null> {
    const host = {
      notifications: this.#notifications,
      assertOpen: () => this.assertOpen(),
      telemetry: this.conditionTelemetry,
    };
    // A wait aborted before it starts sends nothing, not even the server check, as an acquire.
    if (!this.#closed && signal?.aborted === true) return Promise.reject(signal.reason as Error);
    const startedAt = performance.now();
    const waited = this.#server.passed
      ? waitFor(host, condition, waitMs, signal, startedAt)
      : this.#server.check(signal).then((unasked) => {
          this.#endIfUnanswered(unasked, startedAt, waitMs, `waiting for ${condition.what}`);
          return waitFor(host, condition, waitMs, signal, startedAt);
        });
    return waited.catch((error: unknown) => {
      throw failedAfter(error, `waiting for ${condition.what}`, startedAt);
    });
  }

  /**
   * Runs a script whose every call is safe to repeat (its request key makes it so), retrying
   * transient failures until `until` (monotonic ms; default: a few tries). Failures of Redis
   * reject with a {@link LockError} `REDIS_ERROR` that says what was being done.
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

  #connectSubscriber(): Promise<Subscriber> {
    return openSubscriber({
      redis: this.#redis,
      reach: this.#reach,
      events: this.#events,
      isClosed: () => this.#closed,
      resubscribed: () => this.#notifications.resubscribed(),
    });
  }
}
