import { LockError } from '../errors.js';
import type { LuaScript } from '../scripts/script.js';

/**
 * Reads one script's reply: what it means, or undefined for a reply the script never gives.
 * @internal
 */
export type ReplyReader<R> = (reply: unknown) => R | undefined;

/**
 * What an unexpected reply looked like, for an error message: its type and size, never its text
 * (a reply from a key someone else wrote may hold anything, an owner's token included).
 */
function shapeOf(reply: unknown): string {
  if (reply === null || reply === undefined) return 'nil';
  if (Array.isArray(reply)) return `an array of ${reply.length}`;
  if (typeof reply === 'number') return `the number ${reply}`;
  return `a ${typeof reply}`;
}

/**
 * One call of a Lua script, typed by what its reply means: the script, its keys and arguments,
 * and the reader of its reply, built together by the kind's protocol module. The engine sends it
 * as it is and reads the reply through {@link ScriptCall.decode}, nowhere else.
 *
 * The keys are checked against the script's header when the call is built: a call that names
 * fewer or more keys than its script declares is a bug here, and would read or write a key
 * Redis does not know the script touches (which a Cluster refuses, and a replica may miss).
 *
 * @example
 * ```ts
 * const call = new ScriptCall(luaScripts['lock/force-release'], [key, queue], [channel], (reply) =>
 *   reply === 1 ? true : reply === 0 ? false : undefined,
 * );
 * const freed: boolean = call.decode(await runner.run(call.script, call.keys, call.args, 1_000));
 * ```
 * @internal
 */
export class ScriptCall<R = unknown> {
  readonly script: LuaScript;
  readonly keys: readonly string[];
  readonly args: readonly string[];
  readonly #read: ReplyReader<R>;

  /**
   * @throws RangeError when `keys` are not as many as the script declares (any number, at least
   *   one, for a script that takes a variable number).
   */
  constructor(script: LuaScript, keys: readonly string[], args: readonly string[], read: ReplyReader<R>) {
    const declared = script.numberOfKeys;
    if (declared === null ? keys.length === 0 : keys.length !== declared) {
      throw new RangeError(
        `Script "${script.name}" takes ${declared ?? 'one or more'} key(s), but a call was built with ${keys.length}`,
      );
    }
    this.script = script;
    this.keys = keys;
    this.args = args;
    this.#read = read;
  }

  /**
   * What the reply means.
   * @throws a {@link LockError} `REDIS_ERROR` for a reply the script never gives (a key of the
   *   lock changed by something else, or a script of another version).
   */
  decode(reply: unknown): R {
    const value = this.#read(reply);
    if (value !== undefined) return value;
    throw new LockError(
      'REDIS_ERROR',
      `Unexpected reply from Redis to script "${this.script.name}": ${shapeOf(reply)}`,
    );
  }
}
