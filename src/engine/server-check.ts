import { ClientClosedError, LockError } from '../errors.js';
import { isServerReply } from '../redis/replies.js';
import { isAtLeast, MIN_REDIS_VERSION, redisVersionOf } from '../redis/server-version.js';
import type { Calls } from './calls.js';
import { abortable } from './timing.js';

/**
 * The check that the server is recent enough for latchkey's scripts, made once per client
 * before its first script call (`INFO server`), shared by every call that comes while it is in
 * flight, and remembered: later calls pay nothing. A server that refuses `INFO` (an ACL, a
 * renamed command) is taken as it is. When the server cannot be reached, the call goes on
 * without the check (its own attempts meet the same trouble and deal with it) and the next one
 * asks again: so the check adds at most one command timeout to the first calls of a client.
 * `onPassed` runs once, when the server passes, for checks whose outcome no call waits for.
 * @internal
 */
export class ServerCheck {
  readonly #calls: Calls;
  readonly #onPassed: () => void;
  #passed = false;
  #refusal: LockError | undefined;
  #pending: Promise<unknown> | undefined;

  constructor(calls: Calls, onPassed: () => void = noop) {
    this.#calls = calls;
    this.#onPassed = onPassed;
  }

  /** Whether the server passed: no check is needed any more. */
  get passed(): boolean {
    return this.#passed;
  }

  /**
   * Resolves once the server passed (with undefined) or could not be asked (with the failure of
   * the question); rejects with a LockError `UNSUPPORTED_SERVER` when it is too old (every time,
   * from then on), with a ClientClosedError when the client closes first, and with
   * `signal.reason` on abort, at once.
   */
  check(signal: AbortSignal | undefined): Promise<unknown> {
    if (this.#passed) return Promise.resolve(undefined);
    if (this.#refusal !== undefined) return Promise.reject(this.#refusal);
    this.#pending ??= this.#ask().finally(() => {
      this.#pending = undefined;
    });
    return signal === undefined ? this.#pending : abortable(this.#pending, signal);
  }

  async #ask(): Promise<unknown> {
    let info: unknown;
    try {
      info = await this.#calls.sendOnce(['INFO', 'server']);
    } catch (error) {
      if (error instanceof ClientClosedError) throw error;
      // Refused by the server: taken as it is. Not reached: asked again by the next call.
      if (!(error instanceof Error) || !isServerReply(error)) return error;
      this.#pass();
      return undefined;
    }
    const version = redisVersionOf(info);
    if (version !== undefined) this.#calls.noteServerVersion(version);
    if (version === undefined || isAtLeast(version, MIN_REDIS_VERSION)) {
      this.#pass();
      return undefined;
    }
    this.#refusal = new LockError(
      'UNSUPPORTED_SERVER',
      `Redis ${version} is too old for latchkey, which needs Redis ${MIN_REDIS_VERSION} or later (its scripts use LPOS)`,
    );
    throw this.#refusal;
  }

  #pass(): void {
    this.#passed = true;
    this.#onPassed();
  }
}

function noop(): void {}
