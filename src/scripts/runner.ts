import type { LockRedisClient } from '../redis.js';
import type { LuaScript } from './script.js';

/**
 * No reply within the command timeout: the call may or may not have run on the server.
 * @internal
 */
export class CommandTimeoutError extends Error {
  override readonly name = 'CommandTimeoutError';
  constructor(timeoutMs: number) {
    super(`Redis did not answer within ${timeoutMs} ms`);
  }
}

// Server replies that mean "not now": the script did not run and may be sent again.
const TRANSIENT_REPLY = /^(LOADING|BUSY|TRYAGAIN|MASTERDOWN|CLUSTERDOWN|READONLY|NOREPLICAS)\b/;

function isServerReply(error: Error): boolean {
  // node-redis marks server errors with ErrorReply (and its subclasses); match by name so a
  // second copy of the redis package in node_modules is recognised too.
  let proto: unknown = Object.getPrototypeOf(error);
  while (proto !== null && proto !== Error.prototype) {
    const name = (proto as { constructor?: { name?: string } }).constructor?.name;
    if (name === 'ErrorReply') return true;
    proto = Object.getPrototypeOf(proto);
  }
  return false;
}

/**
 * Whether a failed call may succeed if sent again: lost connections, timeouts, a server that
 * is loading or failing over. A closed client and server errors such as WRONGTYPE are not.
 * @internal
 */
export function isTransient(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  if (isServerReply(error)) return TRANSIENT_REPLY.test(error.message);
  return error.message !== 'The client is closed';
}

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT');
}

/**
 * Runs embedded scripts: EVALSHA, and on NOSCRIPT (a restarted or flushed server) the same
 * call as EVAL, which also puts the script back in the server's cache.
 * @internal
 */
export class ScriptRunner {
  readonly #client: LockRedisClient;
  readonly #timeoutMs: number;

  constructor(client: LockRedisClient, timeoutMs: number) {
    this.#client = client;
    this.#timeoutMs = timeoutMs;
  }

  async run(
    script: LuaScript,
    keys: readonly string[],
    args: readonly string[],
    timeoutMs = this.#timeoutMs,
  ): Promise<unknown> {
    const rest = [String(keys.length), ...keys, ...args];
    try {
      return await this.send(['EVALSHA', script.sha1, ...rest], timeoutMs);
    } catch (error) {
      if (!isNoScript(error)) throw error;
      return this.send(['EVAL', script.source, ...rest], timeoutMs);
    }
  }

  /** One command with the command timeout: node-redis waits forever once a command is written. */
  send(args: string[], timeoutMs = this.#timeoutMs): Promise<unknown> {
    // Aborting takes a command that was never written out of node-redis's queue, so a call
    // given up while disconnected cannot run later, after the caller has moved on.
    const abort = new AbortController();
    const reply = this.#client.sendCommand(args, { abortSignal: abort.signal });
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        abort.abort();
        reject(new CommandTimeoutError(timeoutMs));
      }, timeoutMs);
      timer.unref();
      reply.then(
        (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        (error: unknown) => {
          clearTimeout(timer);
          reject(error instanceof Error ? error : new Error(String(error)));
        },
      );
    });
  }
}
