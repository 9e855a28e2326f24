/**
 * What Valkey GLIDE hands back (standalone and cluster clients alike), in the form the other
 * libraries give it: server errors as the server wrote them, RESP3 maps as key-value arrays.
 */

/**
 * A server's error reply, under the name the other libraries give theirs (see replies.ts).
 * @internal
 */
export class ReplyError extends Error {
  override readonly name = 'ReplyError';
}

/**
 * The error codes of the server's replies that GLIDE's core names by a kind of its own, and
 * writes as "An error was signalled by the server: - NoScriptError: No matching script…".
 * Other codes it writes as "WRONGTYPE: Operation against…".
 */
const SERVER_ERROR_CODES: Readonly<Record<string, string>> = {
  ResponseError: 'ERR',
  ExecAbortError: 'EXECABORT',
  BusyLoadingError: 'LOADING',
  NoScriptError: 'NOSCRIPT',
  Moved: 'MOVED',
  Ask: 'ASK',
  TryAgain: 'TRYAGAIN',
  ClusterDown: 'CLUSTERDOWN',
  CrossSlot: 'CROSSSLOT',
  MasterDown: 'MASTERDOWN',
  ReadOnly: 'READONLY',
  NotBusy: 'NOTBUSY',
  PermissionDenied: 'NOPERM',
};

const NAMED_KIND = /^An error was signalled by the server: - (\w+): ([\s\S]*)$/;
const CODE_FIRST = /^([A-Z][A-Z0-9_-]*): ([\s\S]*)$/;

/** A server error as the server wrote it, "CODE detail", from GLIDE's wording of it. */
function serverErrorText(message: string): string {
  const named = NAMED_KIND.exec(message);
  if (named !== null) {
    const code = SERVER_ERROR_CODES[named[1] ?? ''];
    return code === undefined ? message : `${code} ${named[2] ?? ''}`;
  }
  const coded = CODE_FIRST.exec(message);
  return coded === null ? message : `${coded[1] ?? ''} ${coded[2] ?? ''}`;
}

/** GLIDE's errors as the engine reads errors (see replies.ts). @internal */
export function translated(error: unknown): Error {
  if (!(error instanceof Error)) return new Error(String(error));
  const kind = error.constructor.name;
  if (kind === 'RequestError') return new ReplyError(serverErrorText(error.message), { cause: error });
  if (kind === 'ClosingError') return new Error('The client is closed', { cause: error });
  return error;
}

/**
 * A RESP3 map as GLIDE gives it (an array of `{ key, value }`), flattened into the
 * key-value array of RESP2, as the other libraries give maps; anything else as it is. @internal
 */
export function flatMaps(reply: unknown): unknown {
  if (!Array.isArray(reply)) return reply;
  const first: unknown = reply[0];
  const isRecord =
    typeof first === 'object' &&
    first !== null &&
    !Array.isArray(first) &&
    !Buffer.isBuffer(first) &&
    'key' in first;
  if (!isRecord) return reply.map(flatMaps);
  return (reply as { key: unknown; value: unknown }[]).flatMap(({ key, value }) => [key, flatMaps(value)]);
}
