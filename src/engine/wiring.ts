// The engine's parts made from its settings and wired to one another: what Engine's constructor
// builds, apart from the operations the engine offers on them.
import { randomBytes } from 'node:crypto';
import { ClientClosedError, LockError } from '../errors.js';
import { grantChannel, isCompanionKey } from '../keys.js';
import type { RedisConnection } from '../redis/connection.js';
import { isServerReply } from '../redis/replies.js';
import { keySlot } from '../redis/slot.js';
import { ScriptRunner } from '../scripts/runner.js';
import { Acquirer } from './acquire/acquire.js';
import { Calls } from './calls.js';
import { OperationChains } from './chains.js';
import type { Events } from './events.js';
import { Holds } from './holds/holds.js';
import { Reachability } from './reachability.js';
import { Replication, type ReplicationSettings } from './replication.js';
import { ServerCheck } from './server-check.js';
import { createTelemetry, NO_TELEMETRY, openTelemetry, type Telemetry } from './telemetry.js';
import { Notifications } from './wait/channels.js';
import { openSubscriber } from './wait/subscriber.js';

/**
 * How long a last release is retried while Redis does not answer: twice the command timeout,
 * within these bounds.
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

/** What the parts ask of the engine that holds them. @internal */
export interface EngineState {
  /** Whether the engine was closed. */
  readonly isClosed: () => boolean;
  /** Throws ClientClosedError once it was. */
  readonly assertOpen: () => void;
}

/** The engine's parts, wired to one another. @internal */
export interface EngineParts {
  readonly telemetry: Telemetry;
  readonly reach: Reachability;
  readonly calls: Calls;
  readonly server: ServerCheck;
  readonly holds: Holds;
  readonly notifications: Notifications;
  readonly acquirer: Acquirer;
}

/** The parts that send: whether Redis answers, and the calls that go through it. */
function wireCalls(
  redis: RedisConnection,
  events: Events,
  settings: EngineSettings,
  isClosed: () => boolean,
): { reach: Reachability; calls: Calls } {
  const runner = new ScriptRunner(redis, settings.commandTimeoutMs);
  const keyPrefix = settings.keyPrefix ?? '';
  const reach = new Reachability(
    {
      thresholdMs: settings.commandTimeoutMs,
      report: settings.reportUnreachable === true,
      nameOf: (key) =>
        key.startsWith(keyPrefix) && !isCompanionKey(key) ? key.slice(keyPrefix.length) : undefined,
    },
    events,
  );
  const calls = new Calls(
    runner,
    settings.commandTimeoutMs,
    isClosed,
    reach,
    settings.syncReplicas === undefined ? undefined : new Replication(settings.syncReplicas, runner),
  );
  return { reach, calls };
}

/**
 * Asks once whether Redis lets this client's user count a channel's subscribers (`PUBSUB
 * NUMSUB`), as a release does inside its script before it hands the lock to a waiter. A script
 * that is refused hands nothing over and frees the lock instead: still correct, but waiters
 * are no longer served in the order they came, and take longer. That degrades nothing a
 * caller sees fail, so the refusal is reported on the `error` event.
 */
function checkHandOver(calls: Calls, events: Events, channel: string): void {
  calls.command(['PUBSUB', 'NUMSUB', channel], 'checking that Redis allows hand-overs').then(
    () => undefined,
    (error: unknown) => {
      // Only a refusal by the server says anything; a lost connection or a close does not.
      const refusal = error instanceof LockError ? error.cause : error;
      if (!(refusal instanceof Error) || !isServerReply(refusal)) return;
      events.error(
        new LockError(
          'REDIS_ERROR',
          `Redis refused PUBSUB NUMSUB to this client's user (${refusal.message}): its releases cannot hand a lock to a waiter, so they free it instead, and waiters take it when they hear it is free, not in the order they came. Allow the command (ACL: +pubsub|numsub) to keep hand-overs.`,
          { cause: refusal },
        ),
      );
    },
  );
}

/** Builds the engine's parts from its settings, each given the others it needs. @internal */
export function wireParts(
  redis: RedisConnection,
  events: Events,
  settings: EngineSettings,
  state: EngineState,
): EngineParts {
  const { isClosed, assertOpen } = state;
  const telemetry = settings.telemetry ? createTelemetry(openTelemetry()) : NO_TELEMETRY;
  const { reach, calls } = wireCalls(redis, events, settings, isClosed);
  /** Public: names this client's grant channel and prefixes its tickets. */
  const grants = grantChannel(randomBytes(8).toString('hex'));
  // On a cluster the grant channel lies in another slot than the lock: no hand-overs there.
  const handOver = redis.cluster !== true;
  const server = new ServerCheck(calls, () => {
    if (handOver) checkHandOver(calls, events, grants);
  });
  const chains = new OperationChains();
  const holds = new Holds(calls, chains, events, {
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
  const notifications: Notifications = new Notifications(
    {
      connect: () =>
        openSubscriber({ redis, reach, events, isClosed, resubscribed: () => notifications.resubscribed() }),
      grantChannel: grants,
      grantListener: () => acquirer.onGrant,
      onError: (error) => events.error(error),
      closedError: () => new ClientClosedError(),
    },
    settings.subscriptionLingerMs,
  );
  const acquirer = new Acquirer(
    { watchdogTimeoutMs: settings.watchdogTimeoutMs, grantChannel: grants, handOver, isClosed, assertOpen },
    {
      calls,
      chains,
      holds,
      notifications,
      events,
      // A lease's release goes straight to the holds.
      leaseHost: holds,
      telemetry,
    },
  );
  return { telemetry, reach, calls, server, holds, notifications, acquirer };
}
