import { randomBytes } from 'node:crypto';
import pRetry from 'p-retry';
import { ClientClosedError, LockError } from '../errors.js';
import { isTransient, type ScriptRunner } from '../scripts/runner.js';
import { toError } from './events.js';
import type { Reachability } from './reachability.js';
import type { Replication } from './replication.js';
import type { ScriptCall } from './types.js';

/** A write's reply and how many replicas acknowledged it (see {@link Calls.synced}). @internal */
export interface Synced {
  readonly reply: unknown;
  readonly acknowledged: number;
}

/** A reply without `syncReplicas`: no replica to count, so nothing falls short. */
function unreplicated(reply: unknown): Synced {
  return { reply, acknowledged: Number.POSITIVE_INFINITY };
}

/** Wraps a failure of Redis itself; keeps latchkey's own errors and abort reasons as they are. @internal */
export function redisError(error: unknown, doing: string): unknown {
  if (error instanceof LockError) return error;
  return new LockError('REDIS_ERROR', `Redis failed while ${doing}: ${toError(error).message}`, {
    cause: error,
  });
}

function noop(): void {}

/**
 * How the engine talks to Redis: script calls that are safe to repeat, retried with backoff
 * while that is worth it and never past a deadline; plain read commands; request ids. Every
 * call's failure, and while an outage is suspected every answer, is told to the client's
 * {@link Reachability}.
 * @internal
 */
export class Calls {
  readonly #runner: ScriptRunner;
  readonly #isClosed: () => boolean;
  readonly #reach: Reachability;
  readonly #requestPrefix = randomBytes(6).toString('hex');
  #requestCounter = 0;
  /** One try of a script call; made once, as every call on the hot path uses it. */
  readonly #runOne = (call: ScriptCall, timeoutMs: number): Promise<unknown> =>
    this.#runner.run(call.script, call.keys, call.args, timeoutMs);
  /** How long one call may take, in milliseconds. */
  readonly timeoutMs: number;
  /** `syncReplicas`: writes that grant wait for replicas; undefined when off. */
  readonly replication: Replication | undefined;

  constructor(
    runner: ScriptRunner,
    timeoutMs: number,
    isClosed: () => boolean,
    reach: Reachability,
    replication?: Replication,
  ) {
    this.#runner = runner;
    this.timeoutMs = timeoutMs;
    this.#isClosed = isClosed;
    this.#reach = reach;
    this.replication = replication;
  }

  /**
   * `sent` (sent at `sentAt`, for `key`), watched for reachability: its failure, and its answer
   * while an outage is suspected, are told to the client's {@link Reachability}.
   */
  #watched<T>(sent: Promise<T>, sentAt: number, key: string | undefined): Promise<T> {
    const reach = this.#reach;
    return sent.then(
      (value) => {
        reach.answered();
        return value;
      },
      (error: unknown) => {
        reach.failed(error, sentAt, key);
        throw error;
      },
    );
  }

  /** While an outage is suspected, tells the {@link Reachability} when `sent` is answered. */
  #noticed(sent: Promise<unknown>): void {
    const reach = this.#reach;
    if (reach.watching) sent.then(reach.answered, noop);
  }

  /** Whether the user closed the Redis client: no call will get through again. */
  get connectionClosed(): boolean {
    return this.#runner.connectionClosed;
  }

  /** Tells the connection the server's version (it may choose sharded pub/sub by it). */
  noteServerVersion(version: string): void {
    this.#runner.noteServerVersion(version);
  }

  /** A new id for a request, unique to this client. */
  nextRequestId(): string {
    this.#requestCounter += 1;
    return `${this.#requestPrefix}${this.#requestCounter.toString(36)}`;
  }

  /** One try, no retry, within `timeoutMs`. */
  once(call: ScriptCall, timeoutMs: number): Promise<unknown> {
    const sent = this.#runner.run(call.script, call.keys, call.args, timeoutMs);
    // Its failures are the caller's to retry (through syncedRetry) or report (renewFailed).
    this.#noticed(sent);
    return sent;
  }

  /**
   * Runs a script whose every call is safe to repeat, retrying transient failures with backoff
   * while `keepTrying()` says so, and never past `until` (monotonic ms). `repeat` makes the call
   * to send again, when a repeated call must say that it is one (made only if needed).
   */
  idempotent(
    call: ScriptCall,
    keepTrying: (attempt: number) => boolean,
    until = Number.POSITIVE_INFINITY,
    repeat?: () => ScriptCall,
  ): Promise<unknown> {
    return this.#retrying(this.#runOne, call, keepTrying, until, repeat);
  }

  /**
   * What {@link Calls.synced} does once its first try failed with `error`: the caller sent that
   * try itself, with {@link Calls.onceSynced} (or {@link Calls.once} without `syncReplicas`) and
   * the command timeout.
   */
  syncedRetry(error: unknown, call: ScriptCall, keepTrying: (attempt: number) => boolean): Promise<Synced> {
    this.#reach.failed(error, undefined, call.keys[0]);
    const replication = this.replication;
    const until = Number.POSITIVE_INFINITY;
    if (replication === undefined) {
      return this.#retry(error, this.#runOne, call, keepTrying, until, undefined).then(unreplicated);
    }
    return this.#retry(
      error,
      (one, timeoutMs) => this.#syncedOnce(replication, one, timeoutMs),
      call,
      keepTrying,
      until,
      undefined,
    );
  }

  /**
   * {@link Calls.idempotent} for a write that must reach replicas (`syncReplicas`): each try is
   * the script call with the wait command written right behind it, and resolves with the
   * script's reply and the replicas that acknowledged it. Without `syncReplicas`, the reply and
   * `Infinity`.
   */
  synced(
    call: ScriptCall,
    keepTrying: (attempt: number) => boolean,
    until = Number.POSITIVE_INFINITY,
    repeat?: () => ScriptCall,
  ): Promise<Synced> {
    const replication = this.replication;
    if (replication === undefined) {
      return this.idempotent(call, keepTrying, until, repeat).then(unreplicated);
    }
    return this.#retrying(
      (one, timeoutMs) => this.#syncedOnce(replication, one, timeoutMs),
      call,
      keepTrying,
      until,
      repeat,
    );
  }

  /** {@link Calls.synced} with one try, no retry, within `timeoutMs` (plus the replicas' wait). */
  onceSynced(call: ScriptCall, timeoutMs: number): Promise<Synced> {
    const replication = this.replication;
    if (replication === undefined) {
      return this.once(call, timeoutMs).then(unreplicated);
    }
    return this.#syncedOnce(replication, call, timeoutMs);
  }

  async #syncedOnce(replication: Replication, call: ScriptCall, timeoutMs: number): Promise<Synced> {
    const wait = await replication.command();
    const { reply, then } = await this.#runner.runThen(
      call.script,
      call.keys,
      call.args,
      wait,
      timeoutMs,
      replication.timeoutMs,
    );
    return { reply, acknowledged: replication.acknowledged(then) };
  }

  /**
   * The first try goes out directly, with no async frame or closure of its own: the retry
   * machinery is for the rare failure, not the hot path of every acquire and release.
   */
  #retrying<T>(
    tryOnce: (call: ScriptCall, timeoutMs: number) => Promise<T>,
    call: ScriptCall,
    keepTrying: (attempt: number) => boolean,
    until: number,
    repeat: (() => ScriptCall) | undefined,
  ): Promise<T> {
    const sentAt = performance.now();
    const sent = tryOnce(call, this.#tryTimeout(until, sentAt));
    this.#noticed(sent);
    return sent.catch((error: unknown) => {
      this.#reach.failed(error, sentAt, call.keys[0]);
      return this.#retry(error, tryOnce, call, keepTrying, until, repeat);
    });
  }

  /** How long one try may take: the command timeout, and never past `until`. */
  #tryTimeout(until: number, now: number): number {
    return Math.max(1, Math.min(this.timeoutMs, until - now));
  }

  /** After a first try failed with `error`: tries again with backoff while that is worth it. */
  #retry<T>(
    error: unknown,
    tryOnce: (call: ScriptCall, timeoutMs: number) => Promise<T>,
    call: ScriptCall,
    keepTrying: (attempt: number) => boolean,
    until: number,
    repeat: (() => ScriptCall) | undefined,
  ): Promise<T> {
    const retryable = (failure: unknown, attempt: number): boolean =>
      !this.#isClosed() && isTransient(failure) && performance.now() < until && keepTrying(attempt);
    if (!retryable(error, 1)) return Promise.reject(error);
    const retry = repeat?.() ?? call;
    return pRetry(
      () => {
        const sentAt = performance.now();
        return this.#watched(tryOnce(retry, this.#tryTimeout(until, sentAt)), sentAt, retry.keys[0]);
      },
      {
        // Bounded by keepTrying and until, which every caller sets.
        retries: Number.POSITIVE_INFINITY,
        minTimeout: 20,
        maxTimeout: 1_000,
        factor: 2,
        randomize: true,
        unref: true,
        maxRetryTime: Number.isFinite(until)
          ? Math.max(0, until - performance.now())
          : Number.POSITIVE_INFINITY,
        shouldRetry: ({ error: failure, attemptNumber }) => retryable(failure, attemptNumber + 1),
      },
    );
  }

  /** A plain command, one try within the command timeout; failures as the runner gives them. */
  sendOnce(args: string[]): Promise<unknown> {
    if (this.#isClosed()) return Promise.reject(new ClientClosedError());
    return this.#watched(this.#runner.send(args), performance.now(), undefined);
  }

  /** A plain command (a read), retried twice on transient failures. */
  async command(args: string[], doing: string): Promise<unknown> {
    if (this.#isClosed()) throw new ClientClosedError();
    try {
      return await pRetry(() => this.#watched(this.#runner.send(args), performance.now(), undefined), {
        retries: 2,
        minTimeout: 20,
        maxTimeout: 200,
        unref: true,
        shouldRetry: ({ error }) => !this.#isClosed() && isTransient(error),
      });
    } catch (error) {
      throw redisError(error, doing);
    }
  }
}
