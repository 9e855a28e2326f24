import { randomBytes, randomUUID } from 'node:crypto';
import { EventEmitter } from 'eventemitter3';
import pRetry from 'p-retry';
import {
  ClientClosedError,
  InvalidArgumentError,
  LockError,
  LockLostError,
  LockNotOwnedError,
  type LockLostReason,
} from './errors.js';
import { chainId, Hold, OperationChains } from './hold.js';
import { grantChannel, lockKey, requestKey, unlockChannel, waitQueueKey } from './keys.js';
import { Lease, type LeaseHost } from './lease.js';
import { Lock, type LockCore, type LockTarget } from './locks/lock.js';
import type { LockClientEvents, LockClientOptions, LockOptions } from './options.js';
import { UnlockSubscriptions, type Waiter } from './pubsub.js';
import type { LockRedisClient, LockSubscriberClient } from './redis.js';
import { luaScripts } from './scripts/generated.js';
import { isTransient, ScriptRunner } from './scripts/runner.js';
import type { LuaScript } from './scripts/script.js';
import {
  checkBoolean,
  checkDuration,
  checkKey,
  checkOptions,
  checkText,
  describe,
  MAX_NAME_LENGTH,
  MAX_PREFIX_LENGTH,
} from './validate.js';
import { Ticket, TicketBook } from './ticket.js';
import { Watchdog } from './watchdog.js';

const DEFAULT_WATCHDOG_TIMEOUT_MS = 30_000;
const DEFAULT_COMMAND_TIMEOUT_MS = 5_000;
const DEFAULT_SUBSCRIPTION_LINGER_MS = 5_000;
/** Keys per renewal call: 10,000 held locks renew in 20 calls. */
const RENEW_BATCH_SIZE = 500;
/**
 * How long a last release is retried: twice the command timeout, within these bounds. Its
 * request key is kept that long plus the command timeout plus 2 s, so any copy of the call
 * still finds it; short, as every last release writes one.
 */
const RELEASE_RETRY_MIN_MS = 1_000;
const RELEASE_RETRY_MAX_MS = 8_000;
/** How long a cancelled acquire stays refused: past any late copy of it (rare, so generous). */
const CANCEL_RECORD_TTL_MS = 60_000;
/**
 * How long a lock's wait queue outlives the lease of the last waiter that joined or checked it.
 * Waiters check their place again whenever they try; an expired queue still leaves them the
 * unlock message.
 */
const QUEUE_TTL_MS = 60_000;
/** How long a ticket whose waiter gave up is remembered, so a late hand-over to it is returned. */
const LEFT_TICKET_TTL_MS = 5 * 60_000;
/**
 * How long an aborted acquire waits for its clean-up (withdrawing its waiter, giving back what
 * an attempt in flight took) before it rejects; the clean-up goes on after that.
 */
const ABORT_CLEANUP_GRACE_MS = 50;

const CLIENT_OPTIONS = [
  'watchdogTimeoutMs',
  'keyPrefix',
  'commandTimeoutMs',
  'subscriptionLingerMs',
] as const;
const LOCK_OPTIONS = ['reentrant'] as const;

/** An acquire attempt's outcome: a hold, or the PTTL of the lock held by someone else. */
type Attempt = { readonly hold: Hold } | { readonly hold?: undefined; readonly pttl: number };

/**
 * `work`, unless `signal` aborts first: then rejects with `signal.reason` at once (even if it had
 * aborted already), and `work` goes on unobserved.
 */
function abortable<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    if (signal.aborted) {
      onAbort();
      return;
    }
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/** Waits for `work` for at most `ms` milliseconds; never rejects. */
async function within(work: Promise<unknown>, ms: number): Promise<void> {
  if (ms <= 0) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    work.catch(() => undefined),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, ms);
      timer.unref();
    }),
  ]);
  clearTimeout(timer);
}

function toError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}

/** Wraps a failure of Redis itself; keeps latchkey's own errors and abort reasons as they are. */
function redisError(error: unknown, doing: string): unknown {
  if (error instanceof LockError) return error;
  return new LockError('REDIS_ERROR', `Redis failed while ${doing}: ${toError(error).message}`, {
    cause: error,
  });
}

/** What releasing a hold that was already lost rejects with. */
function lostRelease(hold: Hold): LockNotOwnedError {
  return new LockNotOwnedError(`Lock "${hold.name}" is not held: it was lost`, { cause: hold.lostError });
}

function checkClient(redis: unknown): LockRedisClient {
  const candidate = redis as Partial<Record<'sendCommand' | 'duplicate', unknown>> | null;
  if (
    typeof candidate !== 'object' ||
    candidate === null ||
    typeof candidate.sendCommand !== 'function' ||
    typeof candidate.duplicate !== 'function'
  ) {
    throw new InvalidArgumentError(
      `Expected \`redis\` to be a node-redis client (from createClient() of the \`redis\` package), got ${describe(redis)}`,
    );
  }
  if (typeof (redis as { nodeClient?: unknown }).nodeClient === 'function') {
    throw new InvalidArgumentError(
      'Redis Cluster clients are not supported yet; pass a standalone client from createClient()',
    );
  }
  return redis as LockRedisClient;
}

/**
 * Entry point of latchkey: owns a client id, the watchdog that renews held locks, and one
 * subscriber connection for unlock notifications. Pass it your connected node-redis client;
 * latchkey never closes that client.
 *
 * @example
 * ```ts
 * import { createClient } from 'redis';
 * import { LockClient } from 'latchkey';
 *
 * const redis = await createClient({ url: 'redis://localhost:6379' }).connect();
 * const locks = new LockClient(redis);
 * await locks.lock('invoice:42').withLock(async () => {
 *   await issueInvoice(42);
 * });
 * await locks.close();
 * ```
 */
export class LockClient extends EventEmitter<LockClientEvents> {
  readonly #redis: LockRedisClient;
  readonly #runner: ScriptRunner;
  /** Secret: part of every owner field. Never shown in a message, an event or a log line. */
  readonly #clientId = randomUUID();
  readonly #requestPrefix = randomBytes(6).toString('hex');
  #requestCounter = 0;
  /** Public: names this client's grant channel and prefixes its tickets. */
  readonly #grantChannel = grantChannel(randomBytes(8).toString('hex'));
  readonly #tickets = new TicketBook(LEFT_TICKET_TTL_MS);
  readonly #keyPrefix: string;
  readonly #watchdogTimeoutMs: number;
  readonly #commandTimeoutMs: number;
  readonly #releaseRetryMs: number;
  /** Holds of this client by chain id (lock key + owner field), while count > 0. */
  readonly #holds = new Map<string, Hold>();
  /** Acquire calls under way, by chain id (lock key + owner field). */
  readonly #acquiring = new Map<string, number>();
  readonly #chains = new OperationChains();
  readonly #watchdog: Watchdog;
  readonly #subscriptions: UnlockSubscriptions;
  readonly #core: LockCore;
  readonly #leaseHost: LeaseHost = { release: (hold) => this.#release(hold) };
  #closed = false;

  /**
   * @param redis - a connected node-redis client (`createClient(...).connect()`), v5 or later.
   * @param options - see {@link LockClientOptions}; all optional.
   * @throws {@link InvalidArgumentError} for a client that is not a node-redis client or an
   *   option that is unknown or out of range.
   */
  constructor(redis: LockRedisClient, options?: LockClientOptions) {
    super();
    this.#redis = checkClient(redis);
    const given = checkOptions('options', options, CLIENT_OPTIONS);
    this.#watchdogTimeoutMs =
      given.watchdogTimeoutMs === undefined
        ? DEFAULT_WATCHDOG_TIMEOUT_MS
        : checkDuration('watchdogTimeoutMs', given.watchdogTimeoutMs, 30);
    this.#keyPrefix =
      given.keyPrefix === undefined ? '' : checkText('keyPrefix', given.keyPrefix, MAX_PREFIX_LENGTH, true);
    this.#commandTimeoutMs =
      given.commandTimeoutMs === undefined
        ? DEFAULT_COMMAND_TIMEOUT_MS
        : checkDuration('commandTimeoutMs', given.commandTimeoutMs, 1);
    this.#releaseRetryMs = Math.min(
      RELEASE_RETRY_MAX_MS,
      Math.max(RELEASE_RETRY_MIN_MS, 2 * this.#commandTimeoutMs),
    );
    const lingerMs =
      given.subscriptionLingerMs === undefined
        ? DEFAULT_SUBSCRIPTION_LINGER_MS
        : checkDuration('subscriptionLingerMs', given.subscriptionLingerMs, 0);

    this.#runner = new ScriptRunner(this.#redis, this.#commandTimeoutMs);
    this.#watchdog = new Watchdog(
      { renew: (holds) => this.#renew(holds), expire: (hold) => this.#expire(hold) },
      Math.max(10, Math.floor(this.#watchdogTimeoutMs / 3)),
      RENEW_BATCH_SIZE,
    );
    this.#subscriptions = new UnlockSubscriptions(
      {
        connect: () => this.#connectSubscriber(),
        grantChannel: this.#grantChannel,
        onGrant: (ticket) => this.#onGrant(ticket),
        onError: (error) => this.#emitError(error),
        closedError: () => new ClientClosedError(),
      },
      lingerMs,
    );
    this.#core = {
      clientId: this.#clientId,
      assertOpen: () => this.#assertOpen(),
      acquire: (target, field, waitMs, leaseMs, signal) =>
        this.#acquire(target, field, waitMs, leaseMs, signal),
      release: (hold) => this.#release(hold),
      command: (args, doing) => this.#command(args, doing),
      forceUnlock: (target) => this.#forceUnlock(target),
    };
  }

  /**
   * A handle on the lock `name` (key `keyPrefix + name`). Sends nothing to Redis.
   *
   * @param name - 1 to 1,024 characters, not only white space, no control characters, well-formed
   *   Unicode; braces only as one non-empty `{hash tag}`.
   * @example
   * ```ts
   * const lock = locks.lock('invoice:42');
   * const strict = locks.lock('report:daily', { reentrant: false });
   * ```
   */
  lock(name: string, options?: LockOptions): Lock {
    const checked = checkText('name', name, MAX_NAME_LENGTH, false);
    const given = checkOptions('options', options, LOCK_OPTIONS);
    const reentrant = given.reentrant === undefined ? true : checkBoolean('reentrant', given.reentrant);
    const key = lockKey(this.#keyPrefix, checked);
    checkKey(checked, key);
    return new Lock(this.#core, { name: checked, key, channel: unlockChannel(key), reentrant });
  }

  /** Whether {@link LockClient.close} was called. */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Stops the watchdog and closes the subscriber connection this client opened. Waiting
   * acquisitions reject with {@link ClientClosedError}; locks still held are released (one
   * attempt each) and their leases' signals abort with a {@link LockLostError} (reason
   * `client-closed`). The node-redis client you passed in stays open.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#watchdog.stop();
    const held = [...this.#holds.values()];
    this.#holds.clear();
    const releases = held.map((hold) => {
      this.#markLost(hold, 'client-closed', `Lock "${hold.name}" was given up because its LockClient closed`);
      return this.#runner
        .run(luaScripts['lock/abandon'], [hold.key, waitQueueKey(hold.key)], [hold.channel, hold.field])
        .catch(() => undefined);
    });
    await Promise.all([this.#subscriptions.close(), ...releases]);
  }

  /** Same as {@link LockClient.close}, for `await using locks = new LockClient(redis)`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  // ---- internals -------------------------------------------------------------------------

  #assertOpen(): void {
    if (this.#closed) throw new ClientClosedError();
  }

  #nextRequestId(): string {
    this.#requestCounter += 1;
    return `${this.#requestPrefix}${this.#requestCounter.toString(36)}`;
  }

  #emitError(error: Error): void {
    try {
      this.emit('error', error);
    } catch {
      // A throwing 'error' listener has nowhere left to report to.
    }
  }

  #emit<E extends Exclude<keyof LockClientEvents, 'error'>>(
    event: E,
    payload: Parameters<LockClientEvents[E]>[0],
  ): void {
    try {
      (this.emit as (event: E, payload: unknown) => boolean)(event, payload);
    } catch (error) {
      this.#emitError(toError(error));
    }
  }

  async #connectSubscriber(): Promise<LockSubscriberClient> {
    const subscriber = this.#redis.duplicate();
    subscriber.on('error', (error) => {
      if (!this.#closed) this.#emitError(error);
    });
    let connected = false;
    subscriber.on('ready', () => {
      // The first 'ready' is the initial connection; later ones follow a reconnect, after
      // which unlock messages may have been missed.
      if (connected) {
        // A hand-over while the subscriber was away skipped this client's waiters: each tries
        // again, and the attempt queues it anew if its entry is gone.
        this.#subscriptions.resubscribed();
      }
      connected = true;
    });
    try {
      await subscriber.connect();
    } catch (error) {
      try {
        subscriber.destroy();
      } catch {
        // Nothing to close.
      }
      throw error;
    }
    if (this.#closed) {
      subscriber.destroy();
      throw new ClientClosedError();
    }
    return subscriber;
  }

  /**
   * Runs a script whose every call is safe to repeat, retrying transient failures with backoff
   * while `keepTrying()` says so.
   */
  async #callIdempotent(
    script: LuaScript,
    keys: readonly string[],
    args: readonly string[],
    keepTrying: (attempt: number) => boolean,
    timeoutMs = this.#commandTimeoutMs,
    until = Number.POSITIVE_INFINITY,
    retryArgs = args,
  ): Promise<unknown> {
    // No try, and no wait between tries, outlasts `until`.
    const tryTimeout = (): number => Math.max(1, Math.min(timeoutMs, until - performance.now()));
    const retryable = (error: unknown, attempt: number): boolean =>
      !this.#closed && isTransient(error) && performance.now() < until && keepTrying(attempt);
    // The first try goes out directly: the retry machinery is for the rare failure, not the
    // hot path of every acquire and release.
    try {
      return await this.#runner.run(script, keys, args, tryTimeout());
    } catch (error) {
      if (!retryable(error, 1)) throw error;
    }
    return pRetry(() => this.#runner.run(script, keys, retryArgs, tryTimeout()), {
      retries: 1_000,
      minTimeout: 20,
      maxTimeout: 1_000,
      factor: 2,
      randomize: true,
      unref: true,
      maxRetryTime: Number.isFinite(until)
        ? Math.max(0, until - performance.now())
        : Number.POSITIVE_INFINITY,
      shouldRetry: ({ error, attemptNumber }) => retryable(error, attemptNumber + 1),
    });
  }

  async #command(args: string[], doing: string): Promise<unknown> {
    this.#assertOpen();
    try {
      return await pRetry(() => this.#runner.send(args), {
        retries: 2,
        minTimeout: 20,
        maxTimeout: 200,
        unref: true,
        shouldRetry: ({ error }) => !this.#closed && isTransient(error),
      });
    } catch (error) {
      throw redisError(error, doing);
    }
  }

  // ---- acquire ---------------------------------------------------------------------------

  async #acquire(
    target: LockTarget,
    field: string,
    waitMs: number,
    leaseMs: number | undefined,
    signal: AbortSignal | undefined,
  ): Promise<Lease | null> {
    const startedAt = performance.now();
    const deadline = startedAt + waitMs;
    const ttlMs = leaseMs ?? this.#watchdogTimeoutMs;
    const watchdog = leaseMs === undefined;
    // Only an acquire that may wait joins the queue, and only once this client listens for
    // hand-overs: a hand-over nobody hears is skipped, so it would be wasted.
    let ticket =
      waitMs > 0 && this.#subscriptions.grantsReady
        ? new Ticket(target, field, ttlMs, this.#grantChannel)
        : undefined;
    const chain = chainId(target.key, field);
    this.#acquiring.set(chain, (this.#acquiring.get(chain) ?? 0) + 1);
    /** An attempt the caller stopped waiting for: what it took must be given back. */
    let abandoned: Promise<unknown> | undefined;
    const attempt = async (): Promise<Attempt> => {
      const sent = this.#attempt(
        target,
        field,
        chain,
        ttlMs,
        watchdog,
        deadline,
        ticket !== undefined && this.#subscriptions.grantsReady ? ticket : undefined,
      );
      if (signal === undefined) return sent;
      try {
        return await abortable(sent, signal);
      } catch (error) {
        if (signal.aborted && error === signal.reason) {
          abandoned = sent.then(
            (outcome) => (outcome.hold === undefined ? undefined : this.#release(outcome.hold)),
            () => undefined,
          );
          abandoned.catch(() => undefined);
        }
        throw error;
      }
    };

    let waiter: Waiter | undefined;
    let acquired = false;
    try {
      const generationBefore = this.#subscriptions.generationOf(target.channel);
      let outcome = await attempt();
      if (outcome.hold !== undefined) {
        acquired = true;
        return await this.#granted(outcome.hold, startedAt, signal);
      }
      if (waitMs === 0) return null;
      ticket ??= new Ticket(target, field, ttlMs, this.#grantChannel);

      this.#assertOpen();
      signal?.throwIfAborted();
      const joined = this.#subscriptions.join(target.channel);
      waiter = joined.waiter;
      ticket.waiter = waiter;
      if (joined.fresh || !this.#subscriptions.grantsReady) {
        // Until SUBSCRIBE is confirmed an unlock would go unheard, so try again once it is.
        await waiter.untilReady(deadline - performance.now(), signal);
        this.#assertOpen();
        signal?.throwIfAborted();
      }
      // When the lock is expected to expire, as far as this waiter knows: an expired lock
      // publishes nothing, so the head of the local queue wakes up then.
      let expiresAt = outcome.pttl >= 0 ? performance.now() + outcome.pttl : Number.POSITIVE_INFINITY;
      let tryNow = joined.fresh || generationBefore !== waiter.generation || ticket.token === undefined;
      for (;;) {
        if (ticket.granted === undefined && performance.now() >= deadline) return null;
        if (!tryNow && ticket.granted === undefined) {
          const remaining = deadline - performance.now();
          if (remaining <= 0) return null;
          const untilExpiry = expiresAt - performance.now();
          const bound = waiter.isHead ? Math.min(untilExpiry, remaining) : remaining;
          const reason = await waiter.wait(bound, signal);
          this.#assertOpen();
          signal?.throwIfAborted();
          // A new head only starts watching the expiry, unless that is already due.
          if (reason === 'promoted' && expiresAt > performance.now()) continue;
          if (reason === 'timeout' && performance.now() >= deadline) return null;
        }
        const generation = waiter.generation;
        outcome = await attempt();
        if (outcome.hold !== undefined) {
          acquired = true;
          return await this.#granted(outcome.hold, startedAt, signal);
        }
        expiresAt = outcome.pttl >= 0 ? performance.now() + outcome.pttl : Number.POSITIVE_INFINITY;
        // A message that arrived while the attempt was in flight may be the release it missed.
        tryNow = waiter.generation !== generation;
      }
    } catch (error) {
      if (signal?.aborted === true && error === signal.reason) throw error;
      throw redisError(error, `waiting for lock "${target.name}"`);
    } finally {
      const others = (this.#acquiring.get(chain) ?? 1) - 1;
      if (others > 0) this.#acquiring.set(chain, others);
      else this.#acquiring.delete(chain);
      waiter?.leave(acquired);
      if (ticket !== undefined) ticket.waiter = undefined;
      if (!acquired && !this.#closed && (ticket !== undefined || abandoned !== undefined)) {
        // A caller that gave up is neither queued nor holding when its call returns, as long
        // as Redis answers in time: by its deadline plus a command timeout, or within a short
        // grace after an abort. Otherwise the clean-up goes on after the call returned.
        const budget =
          signal?.aborted === true
            ? ABORT_CLEANUP_GRACE_MS
            : Number.isFinite(deadline)
              ? deadline + this.#commandTimeoutMs - performance.now()
              : this.#commandTimeoutMs;
        await within(Promise.all([ticket && this.#withdraw(ticket), abandoned]), budget);
      }
    }
  }

  /**
   * Takes a ticket whose waiter gave up out of the queue; if a release handed it the lock
   * meanwhile, passes the lock on. Runs after this owner's other requests on the lock, so after
   * an attempt still in flight. Until it is done the ticket's tokens are remembered, so a
   * hand-over to it that is heard meanwhile (or after it failed) is passed on as well.
   */
  async #withdraw(ticket: Ticket): Promise<void> {
    const { target, field } = ticket;
    const chain = chainId(target.key, field);
    this.#tickets.leave(ticket, performance.now());
    try {
      await this.#chains.run(chain, async () => {
        // Never queued, or the entry went with a hand-over this owner used.
        if (ticket.token === undefined) return;
        this.#assertOpen();
        // The owner's field is the hand-over's to give back only if nothing else of this owner
        // may stand behind it: no hold, and no other acquire whose own hand-over it may be.
        // Such an acquire is woken instead: its attempt finds the lock handed to it, or not.
        const waiting = this.#acquiring.has(chain);
        const handed = this.#holds.has(chain) || waiting ? '' : '1';
        if (waiting) this.#tickets.wakeOthers(ticket);
        await this.#callIdempotent(
          luaScripts['lock/withdraw'],
          [target.key, waitQueueKey(target.key)],
          [target.channel, field, ticket.entry(ticket.token), handed],
          (attempt) => attempt < 3,
        );
      });
      if (!ticket.cancelled) this.#tickets.done(ticket);
    } catch {
      // Remembered: a late hand-over to it is passed on when heard.
    }
  }

  /** A release handed a lock to one of this client's tickets. */
  #onGrant(token: string): void {
    const ticket = this.#tickets.waiting(token);
    if (ticket !== undefined) {
      ticket.granted = token;
      ticket.waiter?.wake('attempt');
      return;
    }
    const left = this.#tickets.left(token);
    // Its waiter gave up: pass the lock on, unless the same owner has taken it since.
    if (left !== undefined) void this.#withdraw(left);
  }

  async #granted(hold: Hold, startedAt: number, signal: AbortSignal | undefined): Promise<Lease> {
    const lease = new Lease(hold, this.#leaseHost);
    if (this.#closed || signal?.aborted === true) {
      // Granted after the caller gave up: hand the lock straight back.
      await lease.release().catch(() => undefined);
      this.#assertOpen();
      signal?.throwIfAborted();
    }
    if (this.listenerCount('acquired') > 0) {
      this.#emit('acquired', {
        name: hold.name,
        key: hold.key,
        holdCount: hold.count,
        waitedMs: performance.now() - startedAt,
      });
    }
    return lease;
  }

  /** One acquire request, serialized with every other request of the same owner on this lock. */
  #attempt(
    target: LockTarget,
    field: string,
    chain: string,
    ttlMs: number,
    watchdog: boolean,
    deadline: number,
    ticket: Ticket | undefined,
  ): Promise<Attempt> {
    return this.#chains.run(chain, async (keepBusy) => {
      this.#assertOpen();
      const existing = this.#holds.get(chain);
      // Handed over by a release after the latest attempt found this waiter queued: the lease
      // it set runs at least from that attempt's send. With half of it left, take it without
      // asking; otherwise (or if this owner took the lock meanwhile) the attempt below
      // confirms or re-enters.
      if (ticket?.granted !== undefined && ticket.takeGrant(performance.now()) && existing === undefined) {
        const hold = new Hold(target.name, target.key, target.channel, field, ttlMs, watchdog, chain);
        hold.count = 1;
        hold.extend(ticket.sentAt);
        this.#holds.set(chain, hold);
        this.#watchdog.track(hold);
        return { hold };
      }
      const expected = existing?.count ?? 0;
      // A re-entry keeps the mode and TTL of the first acquisition.
      const hold =
        existing ?? new Hold(target.name, target.key, target.channel, field, ttlMs, watchdog, chain);
      const request = requestKey(target.key, this.#nextRequestId());
      const keys = [target.key, request, waitQueueKey(target.key)];
      if (ticket !== undefined) this.#tickets.issue(ticket, this.#nextRequestId());
      const waiter = ticket?.entry(ticket.pending) ?? '';
      const queuedAs = ticket?.entry(ticket.token) ?? '';
      const args = [
        String(hold.ttlMs),
        field,
        String(expected),
        waiter,
        queuedAs,
        String(hold.ttlMs + QUEUE_TTL_MS),
        '',
      ];
      const sentAt = performance.now();
      let reply: unknown;
      try {
        reply = await this.#callIdempotent(
          luaScripts['lock/acquire'],
          keys,
          args,
          // A call with a deadline ends by it plus one command timeout, whatever Redis does.
          (attempt) => (Number.isFinite(deadline) ? performance.now() < deadline : attempt < 6),
          this.#commandTimeoutMs,
          deadline + this.#commandTimeoutMs,
          // A repeated call may find the entry its first copy queued.
          args.with(6, '1'),
        );
      } catch (error) {
        if (isTransient(error)) {
          // The request may still have been applied. Refuse any late replay of it and undo it
          // if it went through, before this owner's next request on the lock.
          keepBusy(this.#cancelAcquire(hold, request, expected, [waiter, queuedAs]));
          if (ticket !== undefined) {
            ticket.cancelled = true;
            this.#tickets.leave(ticket, performance.now());
          }
        }
        if (ticket !== undefined) this.#tickets.settle(ticket, sentAt, undefined);
        throw redisError(error, `acquiring lock "${target.name}"`);
      }

      if (reply === null || reply === undefined) {
        if (ticket !== undefined) this.#tickets.settle(ticket, sentAt, undefined);
        if (hold.lost) {
          // Lost while this re-entry was in flight; the clean-up queued after it drops the field.
          throw hold.lostError ?? new LockLostError(`Lock "${target.name}" was lost`, 'not-owner');
        }
        hold.count = expected + 1;
        hold.extend(sentAt);
        if (existing === undefined) {
          this.#holds.set(chain, hold);
          this.#watchdog.track(hold);
        } else {
          this.#watchdog.touched(hold);
        }
        return { hold };
      }
      if (Array.isArray(reply)) {
        // Held by another owner: its PTTL, and whether the waiter's entry is the new one.
        if (ticket !== undefined) this.#tickets.settle(ticket, sentAt, Number(reply[1]) === 1);
        return { pttl: Number(reply[0]) };
      }
      if (ticket !== undefined) this.#tickets.settle(ticket, sentAt, undefined);
      const code = Number(reply);
      if (code === -4) {
        const message = `Lock "${target.name}" is no longer held by this owner: it was lost or changed behind its back`;
        throw existing === undefined
          ? new LockLostError(message, 'not-owner')
          : this.#markLost(existing, 'not-owner', message);
      }
      // -3: only a request this client gave up on is refused, and requests are never reused.
      throw new LockError(
        'REDIS_ERROR',
        code === -3
          ? `Acquire request for lock "${target.name}" was refused as cancelled`
          : `Unexpected reply from the acquire script for lock "${target.name}"`,
      );
    });
  }

  async #cancelAcquire(
    hold: Hold,
    request: string,
    expected: number,
    entries: readonly [waiter: string, queuedAs: string],
  ): Promise<void> {
    const giveUpAt = performance.now() + hold.ttlMs + CANCEL_RECORD_TTL_MS / 2;
    try {
      await this.#callIdempotent(
        luaScripts['lock/cancel-acquire'],
        [hold.key, request, waitQueueKey(hold.key)],
        [hold.channel, hold.field, String(expected), String(CANCEL_RECORD_TTL_MS), ...entries],
        () => performance.now() < giveUpAt,
      );
    } catch (error) {
      this.#emitError(redisError(error, `cancelling an unconfirmed acquire of lock "${hold.name}"`) as Error);
    }
  }

  // ---- release ---------------------------------------------------------------------------

  #release(hold: Hold): Promise<void> {
    if (hold.lost) {
      return Promise.reject(lostRelease(hold));
    }
    hold.releasing += 1;
    if (hold.count - hold.releasing <= 0) {
      // The last hold is going: renewal stops now, not after the reply.
      this.#watchdog.untrack(hold);
    }
    const chain = hold.chain;
    return this.#chains
      .run(chain, async () => {
        if (hold.lost) {
          throw lostRelease(hold);
        }
        const expected = hold.count;
        const sentAt = performance.now();
        // Worth retrying while the lock is known to be held: after that it has expired anyway,
        // and a missing field could no longer tell "released" from "expired".
        const retryUntil = Math.min(sentAt + this.#releaseRetryMs, hold.validUntil);
        // A repeated last release that finds the owner's field gone within the lease finds what
        // an earlier copy did: the field cannot have expired yet.
        let repeated = expected === 1 && hold.releaseUnconfirmed;
        let reply: unknown;
        try {
          reply = await this.#callIdempotent(
            luaScripts['lock/release'],
            [hold.key, waitQueueKey(hold.key)],
            [hold.channel, String(hold.ttlMs), hold.field, String(expected)],
            () => {
              repeated = true;
              return !hold.lost && performance.now() < retryUntil;
            },
          );
        } catch (error) {
          if (hold.lost) {
            throw lostRelease(hold);
          }
          if (expected === 1) {
            // Unconfirmed last release: renewal is off, so the lock is gone when its lease ends.
            hold.releaseUnconfirmed = true;
            this.#forget(hold);
          }
          throw redisError(error, `releasing lock "${hold.name}"`);
        }
        if (reply === null || reply === undefined) {
          if (!(repeated && expected === 1 && performance.now() < hold.validUntil)) {
            const message = `Lock "${hold.name}" is not held by this owner: it expired or was taken over`;
            this.#markLost(hold, 'not-owner', message);
            throw new LockNotOwnedError(message, { cause: hold.lostError });
          }
        } else if (Number(reply) === -4) {
          const message = `Lock "${hold.name}" is no longer held by this owner: its hold count changed behind its back`;
          this.#markLost(hold, 'not-owner', message);
          throw new LockNotOwnedError(message, { cause: hold.lostError });
        }
        hold.count = expected - 1;
        if (hold.count === 0) {
          this.#forget(hold);
        } else {
          hold.extend(sentAt);
          this.#watchdog.track(hold);
        }
        if (this.listenerCount('released') > 0) {
          this.#emit('released', { name: hold.name, key: hold.key, holdCount: hold.count });
        }
      })
      .finally(() => {
        hold.releasing -= 1;
      });
  }

  /** Drops a hold that ended (released, or left to expire) without declaring it lost. */
  #forget(hold: Hold): void {
    this.#watchdog.untrack(hold);
    const chain = hold.chain;
    if (this.#holds.get(chain) === hold) this.#holds.delete(chain);
  }

  // ---- renewal and loss ------------------------------------------------------------------

  async #renew(holds: readonly Hold[]): Promise<boolean> {
    const sentAt = performance.now();
    const keys = holds.map((hold) => hold.key);
    const args = [String(this.#watchdogTimeoutMs), ...holds.map((hold) => hold.field)];
    let reply: unknown;
    try {
      // No call may outlast the interval: the next one must go out in time.
      reply = await this.#runner.run(
        luaScripts['lock/renew'],
        keys,
        args,
        Math.min(this.#commandTimeoutMs, Math.max(10, Math.floor(this.#watchdogTimeoutMs / 3))),
      );
    } catch (error) {
      if (this.#closed) return true;
      this.#emit('renewFailed', {
        names: holds.map((hold) => hold.name),
        error: toError(error),
        retryInMs: this.#watchdog.retryDelayMs,
      });
      return false;
    }
    if (!Array.isArray(reply)) {
      this.#emitError(new LockError('REDIS_ERROR', 'Unexpected reply from the renewal script'));
      return false;
    }
    holds.forEach((hold, index) => {
      if (hold.lost || this.#holds.get(hold.chain) !== hold) return;
      if (Number(reply[index]) === 1) {
        hold.extend(sentAt);
        this.#watchdog.touched(hold);
      } else {
        this.#markLost(hold, 'not-owner', `Lock "${hold.name}" was lost: it expired or was taken over`);
      }
    });
    return true;
  }

  /** The client's clock says the lease ran out with no renewal confirmed. */
  #expire(hold: Hold): void {
    if (hold.lost) return;
    this.#markLost(
      hold,
      'expired',
      `Lock "${hold.name}" was lost: no renewal was confirmed within its ${hold.ttlMs} ms lease`,
    );
    // Redis may still keep the field (a renewal may land late): drop it, after any request of
    // this owner already under way, so no stale hold lingers.
    void this.#chains.run(hold.chain, async () => {
      const giveUpAt = performance.now() + hold.ttlMs;
      try {
        await this.#callIdempotent(
          luaScripts['lock/abandon'],
          [hold.key, waitQueueKey(hold.key)],
          [hold.channel, hold.field],
          () => !this.#closed && performance.now() < giveUpAt,
        );
      } catch {
        // Unreachable for a whole lease: the TTL has removed the field by now.
      }
    });
  }

  /**
   * Declares a hold lost: aborts its signal, stops renewal, emits `lockLost`. Returns the
   * hold's LockLostError (the first one, if it was lost already). Never throws.
   */
  #markLost(hold: Hold, reason: LockLostReason, message: string): LockLostError {
    if (hold.lostError !== undefined) return hold.lostError;
    const error = new LockLostError(message, reason);
    this.#forget(hold);
    hold.lose(error);
    this.#emit('lockLost', { name: hold.name, key: hold.key, error });
    return error;
  }

  async #forceUnlock(target: LockTarget): Promise<boolean> {
    this.#assertOpen();
    let reply: unknown;
    try {
      reply = await this.#callIdempotent(
        luaScripts['lock/force-release'],
        [target.key, waitQueueKey(target.key)],
        [target.channel],
        (attempt) => attempt < 3,
      );
    } catch (error) {
      throw redisError(error, `force-unlocking lock "${target.name}"`);
    }
    for (const hold of [...this.#holds.values()]) {
      if (hold.key === target.key) {
        this.#markLost(hold, 'force-unlocked', `Lock "${hold.name}" was force-unlocked`);
      }
    }
    return Number(reply) === 1;
  }
}
