import { setMaxListeners } from 'node:events';
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'eventemitter3';
import { Engine, Events, within } from '../engine/index.js';
import { InvalidArgumentError } from '../errors.js';
import { lockKey } from '../keys.js';
import type { LockClientEvents } from '../options.js';
import { adapt, isConnection } from '../redis/adapt.js';
import { problemMessage } from '../redis/problems.js';
import type { LockRedisClient, RedisConnection } from '../redis/connection.js';
import {
  checkDuration,
  checkKey,
  checkOptions,
  checkText,
  describe,
  MAX_NAME_LENGTH,
  MAX_PREFIX_LENGTH,
} from '../validate.js';
import type { RedlockClientOptions } from './options.js';
import { RedlockLock } from './redlock-lock.js';

const DEFAULT_WATCHDOG_TIMEOUT_MS = 30_000;
const DEFAULT_NODE_TIMEOUT_MS = 200;
const DEFAULT_RETRY_DELAY_MS = 200;
const DEFAULT_SUBSCRIPTION_LINGER_MS = 5_000;
/** How many times the lease must exceed the per-master timeout. */
const LEASE_PER_TIMEOUT = 10;
/** What a close waits for beyond two calls to each master, in milliseconds. */
const CLOSE_GRACE_MS = 100;
/** Fewer masters than this give no fault tolerance at all: one failure stops every lock. */
const MIN_MASTERS = 3;

const CLIENT_OPTIONS = [
  'watchdogTimeoutMs',
  'nodeTimeoutMs',
  'retryDelayMs',
  'keyPrefix',
  'subscriptionLingerMs',
] as const;

/** A client's library, as a message names it. */
const LIBRARY_NAMES: Readonly<Record<RedisConnection['library'], string>> = {
  'node-redis': 'node-redis',
  'node-redis-sentinel': 'node-redis',
  ioredis: 'ioredis',
  iovalkey: 'iovalkey',
  glide: 'Valkey GLIDE',
};

/** What was expected of master `index`. */
function expectedMaster(index: number): string {
  return `Expected \`masters[${index}]\` to be a connected standalone client: node-redis (createClient()), ioredis or iovalkey (new Redis()), or Valkey GLIDE (GlideClient)`;
}

/** Why a client latchkey can drive is still no Redlock master: it spans several servers. */
function notIndependent(index: number, connection: RedisConnection): string | undefined {
  const topology =
    connection.cluster === true
      ? 'Cluster'
      : connection.library === 'node-redis-sentinel'
        ? 'Sentinel'
        : undefined;
  if (topology === undefined) return undefined;
  return `${expectedMaster(index)}, got a ${LIBRARY_NAMES[connection.library]} ${topology} client: Redlock needs independent masters`;
}

function checkMasters(masters: unknown): RedisConnection[] {
  if (!Array.isArray(masters)) {
    throw new InvalidArgumentError(
      `Expected \`masters\` to be an array of at least ${MIN_MASTERS} clients, each connected to its own independent master, got ${describe(masters)}`,
    );
  }
  const list = masters as unknown[];
  if (list.length < MIN_MASTERS) {
    throw new InvalidArgumentError(
      `Expected \`masters\` to hold at least ${MIN_MASTERS} clients (an odd number is best: 3, 5, 7), got ${list.length}`,
    );
  }
  const seen = new Set<unknown>();
  return list.map((redis, index) => {
    if (seen.has(redis)) {
      throw new InvalidArgumentError(
        `Expected \`masters\` to hold distinct clients, each connected to its own master; \`masters[${index}]\` is the same client as an earlier one`,
      );
    }
    seen.add(redis);
    const adapted = adapt(redis);
    if (!isConnection(adapted)) {
      throw new InvalidArgumentError(problemMessage(expectedMaster(index), describe(redis), adapted));
    }
    // A LockClient takes these; Redlock's masters must be independent single servers.
    const shared = notIndependent(index, adapted);
    if (shared !== undefined) throw new InvalidArgumentError(shared);
    return adapted;
  });
}

/**
 * The Redlock algorithm over several independent Redis masters: a lock is held when a majority
 * of them (the quorum, N/2 + 1) granted it within its validity, is renewed on every master, and
 * is reported lost once a quorum can no longer be confirmed. Each master stores the lock as
 * {@link LockClient.lock} does (Redisson's RLock hash), through an engine of its own per master.
 * Not reentrant; no wait queue or hand-over across masters. See the README's "Redlock" section
 * for when to prefer fencing tokens or `syncReplicas`.
 *
 * @example
 * ```ts
 * import { createClient } from 'redis';
 * import { RedlockClient } from 'latchkey';
 *
 * const masters = await Promise.all(
 *   ['redis://a:6379', 'redis://b:6379', 'redis://c:6379'].map((url) => createClient({ url }).connect()),
 * );
 * const locks = new RedlockClient(masters);
 * await locks.lock('payout:17').withLock(async (lease) => {
 *   await sendPayout(17, { signal: lease.signal });
 * });
 * await locks.close();
 * ```
 */
export class RedlockClient extends EventEmitter<LockClientEvents> {
  readonly #engines: readonly Engine[];
  readonly #connections: readonly RedisConnection[];
  readonly #events: Events;
  readonly #keyPrefix: string;
  readonly #quorum: number;
  readonly #watchdogTimeoutMs: number;
  readonly #nodeTimeoutMs: number;
  readonly #retryDelayMs: number;
  /** Names this client in async contexts, for the re-entry check; never sent to Redis. */
  readonly #id = randomUUID();
  #closing: Promise<void> | undefined;
  /** Aborted by close(): every waiting acquire listens to it. */
  readonly #closed = new AbortController();

  /**
   * @param masters - at least 3 distinct connected standalone clients (node-redis, ioredis,
   *   iovalkey or Valkey GLIDE),
   *   each to its own independent master; an odd number is best. latchkey never closes them.
   * @param options - see {@link RedlockClientOptions}.
   * @throws {@link InvalidArgumentError} for fewer than 3 clients, the same client twice, a
   *   value that is not such a client, or a bad option — before any command is sent.
   */
  constructor(masters: readonly LockRedisClient[], options?: RedlockClientOptions) {
    super();
    const connections = checkMasters(masters);
    this.#connections = connections;
    const given = checkOptions('options', options, CLIENT_OPTIONS);
    this.#keyPrefix =
      given.keyPrefix === undefined ? '' : checkText('keyPrefix', given.keyPrefix, MAX_PREFIX_LENGTH, true);
    this.#nodeTimeoutMs =
      given.nodeTimeoutMs === undefined
        ? DEFAULT_NODE_TIMEOUT_MS
        : checkDuration('nodeTimeoutMs', given.nodeTimeoutMs, 1);
    this.#watchdogTimeoutMs =
      given.watchdogTimeoutMs === undefined
        ? DEFAULT_WATCHDOG_TIMEOUT_MS
        : checkDuration('watchdogTimeoutMs', given.watchdogTimeoutMs, 30);
    this.checkLease('watchdogTimeoutMs', this.#watchdogTimeoutMs);
    this.#retryDelayMs =
      given.retryDelayMs === undefined
        ? DEFAULT_RETRY_DELAY_MS
        : checkDuration('retryDelayMs', given.retryDelayMs, 1);
    const subscriptionLingerMs =
      given.subscriptionLingerMs === undefined
        ? DEFAULT_SUBSCRIPTION_LINGER_MS
        : checkDuration('subscriptionLingerMs', given.subscriptionLingerMs, 0);
    this.#quorum = Math.floor(connections.length / 2) + 1;
    // Every waiting acquire listens for the close.
    setMaxListeners(0, this.#closed.signal);
    this.#events = new Events(this);
    this.#engines = connections.map((connection) => {
      // Each master's engine reports to an emitter of its own: a master's hold lost is not the
      // lock lost. Its background failures and failed renewals are passed on.
      const emitter = new EventEmitter<LockClientEvents>();
      emitter.on('error', (error) => this.#events.error(error));
      emitter.on('renewFailed', (event) => this.#events.emit('renewFailed', event));
      return new Engine(connection, emitter, {
        watchdogTimeoutMs: this.#watchdogTimeoutMs,
        commandTimeoutMs: this.#nodeTimeoutMs,
        subscriptionLingerMs,
        longHoldWarningMs: 0,
        telemetry: false,
      });
    });
  }

  /** How many masters must grant a lock: N/2 + 1. */
  get quorum(): number {
    return this.#quorum;
  }

  /** How many masters this client spans. */
  get masters(): number {
    return this.#engines.length;
  }

  /**
   * A handle on the lock `name` (key `keyPrefix + name` on every master). Sends nothing to
   * Redis. Same name rules as {@link LockClient.lock}.
   *
   * @throws {@link InvalidArgumentError} for a bad name.
   * @example
   * ```ts
   * const lease = await locks.lock('payout:17').acquire({ waitMs: 2_000 });
   * ```
   */
  lock(name: string): RedlockLock {
    const checked = checkText('name', name, MAX_NAME_LENGTH, false);
    const key = lockKey(this.#keyPrefix, checked);
    checkKey(checked, key);
    return new RedlockLock(
      {
        engines: this.#engines,
        ready: (index) => this.#connections[index]?.sendsAtOnce === true,
        events: this.#events,
        quorum: this.#quorum,
        watchdogTimeoutMs: this.#watchdogTimeoutMs,
        retryDelayMs: this.#retryDelayMs,
        clientId: this.#id,
        checkLease: (leaseMs) => this.checkLease('leaseMs', leaseMs),
        assertOpen: () => this.#engines[0]?.assertOpen(),
        closing: this.#closed.signal,
      },
      this.#keyPrefix,
      checked,
    );
  }

  /** Whether {@link RedlockClient.close} was called. */
  get closed(): boolean {
    return this.#engines[0]?.closed ?? true;
  }

  /**
   * Closes every master's engine: waiting acquisitions reject with {@link ClientClosedError},
   * held locks are given up on every master (one try each) and their leases' signals abort with
   * a {@link LockLostError} (reason `client-closed`). The clients you passed in stay open.
   */
  close(): Promise<void> {
    // A master that is down may keep its engine's close waiting for a subscriber connection
    // that never comes; everything else of a close is bounded by a call to each master.
    const boundMs = 2 * this.#nodeTimeoutMs + CLOSE_GRACE_MS;
    this.#closed.abort();
    this.#closing ??= Promise.all(this.#engines.map((engine) => within(engine.close(), boundMs))).then(() => {
      this.#events.mute();
    });
    return this.#closing;
  }

  /** Same as {@link RedlockClient.close}, for `await using locks = new RedlockClient(...)`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  /** @internal A lease must be far longer than a master's timeout, or rounds eat it up. */
  private checkLease(what: string, leaseMs: number): void {
    if (leaseMs < LEASE_PER_TIMEOUT * this.#nodeTimeoutMs) {
      throw new InvalidArgumentError(
        `Expected \`${what}\` to be at least ${LEASE_PER_TIMEOUT} times \`nodeTimeoutMs\` (${LEASE_PER_TIMEOUT * this.#nodeTimeoutMs} ms), got \`${leaseMs}\``,
      );
    }
  }
}
