// LockClient's arguments, checked before anything is sent: the Redis client it is given, its
// options with their defaults (the settings of its engine) and the options of a lock handle.
import type { EngineSettings } from './engine/index.js';
import { InvalidArgumentError } from './errors.js';
import type { LockClientOptions, LockOptions } from './options.js';
import { adapt, isConnection, type ClientProblem } from './redis/adapt.js';
import type { RedisConnection } from './redis/connection.js';
import { problemMessage } from './redis/problems.js';
import {
  checkBoolean,
  checkDuration,
  checkOptions,
  checkText,
  describe,
  MAX_PREFIX_LENGTH,
} from './validate.js';

const DEFAULT_WATCHDOG_TIMEOUT_MS = 30_000;
const DEFAULT_COMMAND_TIMEOUT_MS = 5_000;
const DEFAULT_SUBSCRIPTION_LINGER_MS = 5_000;
const DEFAULT_LONG_HOLD_WARNING_MS = 10 * 60_000;

const CLIENT_OPTIONS = [
  'watchdogTimeoutMs',
  'keyPrefix',
  'commandTimeoutMs',
  'subscriptionLingerMs',
  'longHoldWarningMs',
  'telemetry',
  'syncReplicas',
] as const;
const SYNC_REPLICAS_OPTIONS = ['count', 'timeoutMs'] as const;
/** At most this many replicas can be asked to acknowledge a write. */
const MAX_SYNC_REPLICAS = 100;
const LOCK_OPTIONS = ['reentrant'] as const;

const EXPECTED_CLIENT =
  'Expected `redis` to be a connected node-redis client (createClient() of the `redis` package) or ioredis client (new Redis() of the `ioredis` package, or of its fork `iovalkey`), or a Valkey GLIDE client (GlideClient.createClient() of `@valkey/valkey-glide`)';

/** A LockClient's engine settings, its key prefix given (`''` when none). @internal */
export interface ClientSettings extends EngineSettings {
  readonly keyPrefix: string;
}

/** What is wrong with the client the user passed, said as what was expected and what arrived. */
function clientProblemMessage(redis: unknown, found: ClientProblem): string {
  return problemMessage(EXPECTED_CLIENT, describe(redis), found);
}

/**
 * `syncReplicas`: a whole `count` from 1 and a `timeoutMs` from 1 to a quarter of the watchdog's
 * lease, so a renewal and its wait fit well within the third of the lease between renewals.
 */
function checkSyncReplicas(value: unknown, watchdogTimeoutMs: number): { count: number; timeoutMs: number } {
  const given = checkOptions('syncReplicas', value, SYNC_REPLICAS_OPTIONS);
  const { count, timeoutMs } = given;
  if (typeof count !== 'number' || !Number.isInteger(count) || count < 1 || count > MAX_SYNC_REPLICAS) {
    throw new InvalidArgumentError(
      `Expected \`syncReplicas.count\` to be a whole number of replicas from 1 to ${MAX_SYNC_REPLICAS}, got ${describe(count)}`,
    );
  }
  const maxWaitMs = Math.floor(watchdogTimeoutMs / 4);
  if (
    typeof timeoutMs !== 'number' ||
    !Number.isInteger(timeoutMs) ||
    timeoutMs < 1 ||
    timeoutMs > maxWaitMs
  ) {
    throw new InvalidArgumentError(
      `Expected \`syncReplicas.timeoutMs\` to be a whole number of milliseconds from 1 to ${maxWaitMs} (a quarter of watchdogTimeoutMs), got ${describe(timeoutMs)}`,
    );
  }
  return { count, timeoutMs };
}

/** The Redis client LockClient was given, adapted; refused with what was expected otherwise. @internal */
export function checkClient(redis: unknown): RedisConnection {
  const adapted = adapt(redis);
  if (isConnection(adapted)) return adapted;
  throw new InvalidArgumentError(clientProblemMessage(redis, adapted));
}

/** LockClient's options, checked, with their defaults: the settings of its engine. @internal */
export function checkClientOptions(options: LockClientOptions | undefined): ClientSettings {
  const given = checkOptions('options', options, CLIENT_OPTIONS);
  const keyPrefix =
    given.keyPrefix === undefined ? '' : checkText('keyPrefix', given.keyPrefix, MAX_PREFIX_LENGTH, true);
  const watchdogTimeoutMs =
    given.watchdogTimeoutMs === undefined
      ? DEFAULT_WATCHDOG_TIMEOUT_MS
      : checkDuration('watchdogTimeoutMs', given.watchdogTimeoutMs, 30);
  return {
    keyPrefix,
    reportUnreachable: true,
    watchdogTimeoutMs,
    syncReplicas:
      given.syncReplicas === undefined ? undefined : checkSyncReplicas(given.syncReplicas, watchdogTimeoutMs),
    commandTimeoutMs:
      given.commandTimeoutMs === undefined
        ? DEFAULT_COMMAND_TIMEOUT_MS
        : checkDuration('commandTimeoutMs', given.commandTimeoutMs, 1),
    subscriptionLingerMs:
      given.subscriptionLingerMs === undefined
        ? DEFAULT_SUBSCRIPTION_LINGER_MS
        : checkDuration('subscriptionLingerMs', given.subscriptionLingerMs, 0),
    longHoldWarningMs:
      given.longHoldWarningMs === undefined
        ? DEFAULT_LONG_HOLD_WARNING_MS
        : checkDuration('longHoldWarningMs', given.longHoldWarningMs, 0),
    telemetry: given.telemetry === undefined ? true : checkBoolean('telemetry', given.telemetry),
  };
}

/** A lock handle's `reentrant` option (default true). @internal */
export function checkReentrant(options: LockOptions | undefined): boolean {
  const given = checkOptions('options', options, LOCK_OPTIONS);
  return given.reentrant === undefined ? true : checkBoolean('reentrant', given.reentrant);
}
