import { setMaxListeners } from 'node:events';
import {
  checkAcquireOptions,
  checkCallback,
  unwatchAbort,
  withLease,
  watchAbort,
  type AbortWatcher,
  type Engine,
  type Events,
  type Lease,
  type Target,
} from '../engine/index.js';
import { ClientClosedError, LockError, LockReentryError, LockTimeoutError } from '../errors.js';
import { lockKey, unlockChannel } from '../keys.js';
import type { AcquireOptions } from '../options.js';
import { currentContext } from '../owner.js';
import { Lock } from '../primitives/lock/lock.js';
import { reentrantProtocol } from '../primitives/lock/protocol.js';
import { pause } from './pause.js';
import { round, type RoundOutcome } from './quorum.js';

/** The kind every master stores: Redisson's RLock, as {@link LockClient.lock} does. */
const PROTOCOL = reentrantProtocol(false);

/** What a {@link RedlockLock} needs from its client. @internal */
export interface RedlockHost {
  readonly engines: readonly Engine[];
  /** Whether master `index` is connected now. */
  readonly ready: (index: number) => boolean;
  readonly events: Events;
  readonly quorum: number;
  readonly watchdogTimeoutMs: number;
  readonly retryDelayMs: number;
  /** Names the client in async contexts; never sent to Redis. */
  readonly clientId: string;
  checkLease(leaseMs: number): void;
  assertOpen(): void;
  /** Aborts when the client closes. */
  readonly closing: AbortSignal;
}

/**
 * One lock over the masters of a {@link RedlockClient}: held while a quorum of them holds it.
 * Get one from {@link RedlockClient.lock}. Not reentrant: taking it again from inside its own
 * `withLock` callback throws {@link LockReentryError}, and two acquisitions from the same code
 * outside one exclude each other.
 *
 * @example
 * ```ts
 * await using lease = await locks.lock('payout:17').acquire({ waitMs: 5_000 });
 * await sendPayout(17, { signal: lease.signal });
 * ```
 */
export class RedlockLock {
  readonly #host: RedlockHost;
  readonly #target: Target;
  /** The same lock on each master, non-reentrant: every acquisition is an owner of its own. */
  readonly #locks: readonly Lock[];

  /** @internal Use {@link RedlockClient.lock}. */
  constructor(host: RedlockHost, keyPrefix: string, name: string) {
    this.#host = host;
    this.#locks = host.engines.map((engine) => new Lock(engine, keyPrefix, name, false));
    const key = lockKey(keyPrefix, name);
    this.#target = { name, key, channel: unlockChannel(key), protocol: PROTOCOL };
  }

  /** The lock's name. */
  get name(): string {
    return this.#target.name;
  }

  /** The lock's Redis key on every master (`keyPrefix + name`). */
  get key(): string {
    return this.#target.key;
  }

  /** Always false: a Redlock lock is not reentrant. */
  get reentrant(): boolean {
    return false;
  }

  /**
   * Takes the lock on a quorum of the masters, trying round after round for up to `waitMs`
   * (default: forever).
   *
   * @throws {@link LockTimeoutError} when `waitMs` runs out with the lock held elsewhere; a
   *   {@link LockError} `REDIS_ERROR` when, at the end, fewer than a quorum of the masters could
   *   be reached; `signal.reason` when aborted; {@link LockReentryError} from inside its own
   *   `withLock`; {@link InvalidArgumentError} for bad options, before any Redis command.
   * @example
   * ```ts
   * const lease = await locks.lock('payout:17').acquire({ waitMs: 5_000 });
   * try {
   *   await sendPayout(17, { signal: lease.signal });
   * } finally {
   *   await lease.release();
   * }
   * ```
   */
  acquire(options?: AcquireOptions): Promise<Lease> {
    return this.#start(options, Number.POSITIVE_INFINITY);
  }

  /**
   * Like `acquire`, but resolves `null` instead of throwing when the lock stays held for
   * `waitMs`, which defaults to 0 (one round).
   * @example
   * ```ts
   * const lease = await locks.lock('report:daily').tryAcquire();
   * if (lease === null) return 'another instance is on it';
   * ```
   */
  async tryAcquire(options?: AcquireOptions): Promise<Lease | null> {
    try {
      return await this.#start(options, 0);
    } catch (error) {
      if (error instanceof LockTimeoutError) return null;
      throw error;
    }
  }

  /**
   * Takes the lock, runs `fn` with it, and releases it however `fn` ends.
   *
   * @throws a {@link LockLostError} when the lock was lost while `fn` ran, with what `fn` threw
   *   as its `cause`; otherwise what `fn` throws, or what `acquire` throws.
   * @example
   * ```ts
   * await locks.lock('payout:17').withLock((lease) => sendPayout(17, { signal: lease.signal }));
   * ```
   */
  withLock<T>(fn: (lease: Lease) => T | PromiseLike<T>, options?: AcquireOptions): Promise<Awaited<T>> {
    try {
      checkCallback(fn);
    } catch (error) {
      return Promise.reject(error);
    }
    return withLease(this.#contextKey(), () => this.acquire(options), fn);
  }

  #contextKey(): string {
    return `${this.#host.clientId}\n${this.#target.key}`;
  }

  async #start(options: AcquireOptions | undefined, defaultWaitMs: number): Promise<Lease> {
    const checked = checkAcquireOptions(options, defaultWaitMs, (leaseMs) => this.#host.checkLease(leaseMs));
    const host = this.#host;
    host.assertOpen();
    checked.signal?.throwIfAborted();
    if (currentContext()?.nonReentrant.has(this.#contextKey()) === true) {
      throw new LockReentryError(
        `Lock "${this.name}" is not reentrant (Redlock) and is already held by this async context; taking it again would wait for itself`,
      );
    }
    const { waitMs, leaseMs } = checked;
    // One signal for every master's calls and waits: the caller's abort or the client's close,
    // whichever comes first (a close rejects the acquire with ClientClosedError at once).
    const stop = new AbortController();
    setMaxListeners(8 + 4 * host.engines.length, stop.signal);
    const onAbort: AbortWatcher = { handleEvent: () => stop.abort(checked.signal?.reason) };
    const onClose = (): void => stop.abort(new ClientClosedError());
    if (checked.signal !== undefined) watchAbort(checked.signal, onAbort);
    host.closing.addEventListener('abort', onClose, { once: true });
    try {
      return await this.#rounds(waitMs, leaseMs, stop.signal);
    } finally {
      if (checked.signal !== undefined) unwatchAbort(checked.signal, onAbort);
      host.closing.removeEventListener('abort', onClose);
    }
  }

  async #rounds(waitMs: number, leaseMs: number | undefined, signal: AbortSignal): Promise<Lease> {
    const host = this.#host;
    const startedAt = performance.now();
    const deadline = startedAt + waitMs;
    const ttlMs = leaseMs ?? host.watchdogTimeoutMs;
    for (;;) {
      // What each master's unlock channel had heard before the round: an unlock announced while
      // the round ran (a holder's release reaching the masters one after another) is not missed.
      const heardBefore = host.engines.map((engine) => engine.heardOn(this.#target.channel));
      const roundStartedAt = performance.now();
      const outcome: RoundOutcome = await round({
        locks: this.#locks,
        ready: host.ready,
        quorum: host.quorum,
        ttlMs,
        leaseMs,
        signal,
        target: this.#target,
        events: host.events,
      });
      if (outcome.won && signal.aborted) {
        // Won as the caller gave up or the client closed: hand the lock straight back.
        await outcome.lease.release().catch(() => undefined);
      }
      host.assertOpen();
      signal.throwIfAborted();
      if (outcome.won) {
        if (host.events.listening('acquired')) {
          host.events.emit('acquired', {
            name: this.name,
            key: this.key,
            holdCount: 1,
            waitedMs: performance.now() - startedAt,
          });
        }
        return outcome.lease;
      }
      const remaining = deadline - performance.now();
      if (remaining <= 0) throw this.#gaveUp(outcome);
      await this.#pause(outcome, heardBefore, performance.now() - roundStartedAt, remaining, signal);
      host.assertOpen();
    }
  }

  /** What an acquire whose wait ran out rejects with, after its last round. */
  #gaveUp(outcome: RoundOutcome & { readonly won: false }): LockError {
    const host = this.#host;
    // So many masters failed that no quorum could have answered.
    if (outcome.failed > host.engines.length - host.quorum) {
      return new LockError(
        'REDIS_ERROR',
        `Could not reach a quorum of masters for lock "${this.name}": ${outcome.failed} of ${host.engines.length} failed, ${host.quorum} needed`,
        { cause: outcome.failure },
      );
    }
    return new LockTimeoutError(`Timed out waiting for lock "${this.name}"`);
  }

  /**
   * The pause between rounds. An unlock message from a master that refused the lock (held
   * elsewhere) ends it, one that came during the round included; the masters this round took
   * and gave back announce only that. After a split vote (this round took some masters, not a
   * quorum) the message is followed by a random wait of up to two rounds' time, so the
   * contenders that split the masters do not all start the next round together; with nothing
   * taken there is no such wait. Without a message the pause lasts a random part of the retry
   * delay.
   */
  #pause(
    outcome: RoundOutcome & { readonly won: false },
    heardBefore: readonly (number | undefined)[],
    roundMs: number,
    remaining: number,
    signal: AbortSignal,
  ): Promise<void> {
    const host = this.#host;
    const delayMs = host.retryDelayMs * (0.5 + Math.random() * 0.5);
    return pause(
      {
        engines: host.engines,
        listensTo: (index) => outcome.refused[index] === true && host.ready(index),
        what: `lock "${this.name}"`,
        channel: this.#target.channel,
        delayMs: Math.min(remaining, delayMs),
        heardBefore,
        jitterMs: outcome.granted === 0 ? 0 : Math.max(1, 2 * roundMs),
      },
      signal,
    );
  }
}
