/**
 * What the client libraries hand back, in the one form the engine reads: replies as plain
 * values, failures sorted into "the server refused" and "the client is closed".
 */

/** node-redis's class of server error replies, ioredis's (from redis-errors). */
const REPLY_ERROR_CLASSES = new Set(['ErrorReply', 'ReplyError']);

/** What each library says of a command sent on a client its user closed. */
const CLOSED_MESSAGES = new Set(['The client is closed', 'Connection is closed.']);

/**
 * Whether `error` is an error reply of the server (the command reached it and was refused or
 * failed there), as opposed to a lost connection or a timeout. Matched by class name along the
 * prototype chain, so a second copy of a library in node_modules is recognised too.
 * @internal
 */
export function isServerReply(error: Error): boolean {
  let proto: unknown = Object.getPrototypeOf(error);
  while (proto !== null && proto !== Error.prototype) {
    const name = (proto as { constructor?: { name?: string } }).constructor?.name;
    if (name !== undefined && REPLY_ERROR_CLASSES.has(name)) return true;
    proto = Object.getPrototypeOf(proto);
  }
  return false;
}

/**
 * Whether `error` is node-redis's rejection of a command taken out of its queue by its abort
 * signal, before it was written: the command never reached Redis.
 * @internal
 */
export function isWithdrawn(error: Error): boolean {
  return error.message === 'The command was aborted' && error.constructor.name === 'AbortError';
}

/** Whether `error` says that the user's client was closed: no command will go out on it. @internal */
export function isClientClosed(error: Error): boolean {
  return CLOSED_MESSAGES.has(error.message);
}

/**
 * A reply as the engine reads it: bulk strings as strings (never Buffers), integers as numbers
 * (a bigint too large for a number as its decimal string), nil as null, booleans as 1 and 0,
 * arrays as arrays of the same. Replies already in that form, the usual case, come back as they
 * are.
 * @internal
 */
export function plainReply(reply: unknown): unknown {
  switch (typeof reply) {
    case 'string':
    case 'number':
      return reply;
    case 'bigint':
      return Number.isSafeInteger(Number(reply)) ? Number(reply) : reply.toString();
    case 'boolean':
      return reply ? 1 : 0;
    case 'undefined':
      return null;
    case 'object':
      if (reply === null) return null;
      if (Array.isArray(reply)) {
        let plain: unknown[] | undefined;
        for (let i = 0; i < reply.length; i += 1) {
          const item: unknown = reply[i];
          const converted = plainReply(item);
          if (converted !== item) {
            plain ??= reply.slice();
            plain[i] = converted;
          }
        }
        return plain ?? reply;
      }
      if (Buffer.isBuffer(reply)) return reply.toString('utf8');
      // A verbatim string (RESP3 `=`) and the like.
      return (reply as { toString(): string }).toString();
    default:
      return reply;
  }
}
