import {
  fairHeartbeatKey,
  fairQueueKey,
  fairTimeoutKey,
  fencingTokenKey,
  latchChannel,
  permitTimeoutKey,
  semaphoreChannel,
  waitQueueKey,
  waitingWritersKey,
} from '../keys.js';
import type { Connection } from './connection.js';
import { CliError, ExitCode } from './exit-codes.js';

/** Wait-queue entries read and shown; the count is always exact. @internal */
export const MAX_WAITERS_SHOWN = 100;
/** Permits out read from a permit semaphore's timeout set; the count is always exact. @internal */
export const MAX_PERMITS_READ = 1_000;
/** A hash with more fields than this is no lock: a lock has one owner, two during a hand-over. */
const MAX_OWNER_FIELDS = 64;
/** Bytes of a string key read: enough for any token or counter, never a whole big value. */
const MAX_STRING_READ = 128;
/** Attempts to read a key whose type keeps changing under the reader. */
const READ_ATTEMPTS = 5;

/** One member of a sorted set and its score, the member as Redis stores it (bytes). @internal */
export interface Scored {
  readonly member: Buffer;
  readonly score: number;
}

/**
 * Everything the layouts tell a key's kind by, read in one MULTI: the key itself and every
 * companion key or channel a kind keeps beside it. A companion that holds something else (a
 * WRONGTYPE answer) reads as absent. @internal
 */
export interface Probe {
  readonly key: string;
  /** What TYPE answered: `hash`, `string`, `none`, or another type. */
  readonly type: string;
  /** PTTL of the key: -2 when missing, -1 without expiry. */
  readonly pttl: number;
  /** Redis's clock, in milliseconds since the epoch. */
  readonly nowMs: number;
  /** A hash's fields and values; undefined for another type or a hash too big to be a lock's. */
  readonly fields: readonly [string, string][] | undefined;
  /** A string's first bytes, as text; null for another type. */
  readonly value: string | null;
  /** A string's length in bytes (0 for another type). */
  readonly valueLength: number;
  /** `redisson_lock_token:{<key>}`: the last fencing token issued; null without one. */
  readonly fencingToken: string | null;
  /** latchkey's wait queue of a lock: its length and (with details) its first entries. */
  readonly lockQueue: { readonly length: number; readonly entries: readonly string[] };
  /** A fair lock's queue and deadlines: `redisson_lock_queue:{<key>}`, `redisson_lock_timeout:{<key>}`. */
  readonly fairQueue: {
    readonly length: number;
    readonly entries: readonly string[];
    readonly timeouts: number;
    /** Each owner's place deadline, in RFairLock's arithmetic (ms since the epoch). */
    readonly deadlines: ReadonlyMap<string, number>;
    /** A latchkey waiter's heartbeat deadline, `{<key>}:latchkey_heartbeats` (ms since the epoch). */
    readonly heartbeats: ReadonlyMap<string, number>;
  };
  /** A permit semaphore's permits out, `{<key>}:timeout`: how many, and the first by lease end. */
  readonly permits: { readonly out: number; readonly first: readonly Scored[] };
  /** A read-write lock's waiting writers, `latchkey_writers:{<key>}` (latchkey's own). */
  readonly waitingWriters: number;
  /** Subscribers of the semaphore channel and the latch channel, the CLI's own left out. */
  readonly listeners: { readonly semaphore: number; readonly latch: number };
}

function text(reply: unknown): string {
  if (typeof reply === 'string') return reply;
  if (Buffer.isBuffer(reply)) return reply.toString('utf8');
  return String(reply);
}

function integer(reply: unknown): number {
  return reply instanceof Error ? 0 : Number(text(reply));
}

function list(reply: unknown): unknown[] {
  return Array.isArray(reply) ? reply : [];
}

/** A flat `[a, b, a, b, ...]` reply as pairs. */
function pairsOf(reply: unknown): [unknown, unknown][] {
  const flat = list(reply);
  const result: [unknown, unknown][] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) result.push([flat[i], flat[i + 1]]);
  return result;
}

function scoresOf(reply: unknown): Map<string, number> {
  return new Map(pairsOf(reply).map(([member, score]) => [text(member), integer(score)]));
}

function bytes(reply: unknown): Buffer {
  return Buffer.isBuffer(reply) ? reply : Buffer.from(text(reply));
}

/** The commands of one probe, the main key's first, then each companion's, in a fixed order. */
function commandsOf(key: string, type: string, details: boolean): string[][] {
  const lockQueue = waitQueueKey(key);
  const fairQueue = fairQueueKey(key);
  // Without details, a range that is always empty keeps every reply in its place.
  const entries = details ? ['0', String(MAX_WAITERS_SHOWN - 1)] : ['1', '0'];
  const deadlines = details ? ['0', String(MAX_PERMITS_READ - 1)] : ['1', '0'];
  return [
    ['TYPE', key],
    ['PTTL', key],
    ['TIME'],
    // A lock's hash is small; a big hash is no lock and is not read. HSCAN on a small hash
    // answers every field at once (cursor 0).
    ...(type === 'hash'
      ? [
          ['HLEN', key],
          ['HSCAN', key, '0', 'COUNT', String(MAX_OWNER_FIELDS * 2)],
        ]
      : []),
    ...(type === 'string'
      ? [
          ['STRLEN', key],
          ['GETRANGE', key, '0', String(MAX_STRING_READ - 1)],
        ]
      : []),
    ['GET', fencingTokenKey(key)],
    ['LLEN', lockQueue],
    ['LRANGE', lockQueue, ...entries],
    ['LLEN', fairQueue],
    ['LRANGE', fairQueue, ...entries],
    ['ZCARD', fairTimeoutKey(key)],
    ['ZRANGE', fairTimeoutKey(key), ...deadlines, 'WITHSCORES'],
    ['ZRANGE', fairHeartbeatKey(key), ...deadlines, 'WITHSCORES'],
    ['ZCARD', permitTimeoutKey(key)],
    ['ZRANGE', permitTimeoutKey(key), '0', String(MAX_PERMITS_READ - 1), 'WITHSCORES'],
    ['ZCARD', waitingWritersKey(key)],
    ['PUBSUB', 'NUMSUB', semaphoreChannel(key), latchChannel(key)],
  ];
}

/** The channels a probe counts listeners on, which `watch` subscribes to itself. @internal */
export function probedChannels(key: string): { semaphore: string; latch: string } {
  return { semaphore: semaphoreChannel(key), latch: latchChannel(key) };
}

/** Options of {@link readProbe}. @internal */
export interface ProbeOptions {
  /** Read the first queue entries and deadlines too (inspect), not only the queues' lengths. */
  readonly details: boolean;
  /** Channels this CLI itself listens on (watch): not counted as listeners. */
  readonly ownChannels?: ReadonlySet<string>;
}

function build(key: string, type: string, replies: unknown[], options: ProbeOptions): Probe {
  const [, pttl, time, ...rest] = replies;
  let fields: [string, string][] | undefined;
  let value: string | null = null;
  let valueLength = 0;
  if (type === 'hash') {
    const [hlen, scan] = rest.splice(0, 2);
    const [cursor, found] = list(scan);
    if (integer(hlen) <= MAX_OWNER_FIELDS && text(cursor) === '0') {
      fields = pairsOf(found).map(([field, count]) => [text(field), text(count)]);
    }
  } else if (type === 'string') {
    const [length, start] = rest.splice(0, 2);
    valueLength = integer(length);
    value = text(start);
  }
  const [token, lockLength, lockEntries, fairLength, fairEntries, timeouts, deadlines, heartbeats] =
    rest.splice(0, 8);
  const [permitsOut, permitsFirst, writers, numsub] = rest;
  const [seconds, micros] = list(time);
  const listening = new Map(pairsOf(numsub).map(([channel, count]) => [text(channel), integer(count)]));
  const own = options.ownChannels ?? new Set<string>();
  const listenersOf = (channel: string): number =>
    Math.max(0, (listening.get(channel) ?? 0) - (own.has(channel) ? 1 : 0));
  const channels = probedChannels(key);
  return {
    key,
    type,
    pttl: integer(pttl),
    nowMs: integer(seconds) * 1_000 + Math.floor(integer(micros) / 1_000),
    fields,
    value,
    valueLength,
    fencingToken: token === null || token === undefined || token instanceof Error ? null : text(token),
    lockQueue: { length: integer(lockLength), entries: list(lockEntries).map(text) },
    fairQueue: {
      length: integer(fairLength),
      entries: list(fairEntries).map(text),
      timeouts: integer(timeouts),
      deadlines: scoresOf(deadlines),
      heartbeats: scoresOf(heartbeats),
    },
    permits: {
      out: integer(permitsOut),
      first: pairsOf(permitsFirst).map(([member, score]) => ({
        member: bytes(member),
        score: integer(score),
      })),
    },
    waitingWriters: integer(writers),
    listeners: { semaphore: listenersOf(channels.semaphore), latch: listenersOf(channels.latch) },
  };
}

/**
 * Reads the key and its companions at one instant (one MULTI). TYPE is read first to pick the
 * commands that fit the key; a key that changes type meanwhile is read again.
 * @internal
 */
export async function readProbe(redis: Connection, key: string, options: ProbeOptions): Promise<Probe> {
  let type = text(await redis.send(['TYPE', key]));
  for (let attempt = 1; ; attempt += 1) {
    const replies = await redis.transaction(commandsOf(key, type, options.details));
    // Only the key's own commands (TYPE, PTTL, TIME and its reads, before the companions') must
    // answer: a companion of another type reads as absent.
    const own = replies.slice(0, type === 'hash' || type === 'string' ? 5 : 3);
    const failed = own.find((reply): reply is Error => reply instanceof Error);
    if (failed !== undefined) {
      // WRONGTYPE: the key changed type between TYPE and MULTI; read again.
      if (attempt < READ_ATTEMPTS && failed.message.startsWith('WRONGTYPE')) {
        type = text(await redis.send(['TYPE', key]));
        continue;
      }
      throw redis.failure(failed, `reading ${JSON.stringify(key)}`);
    }
    const typeNow = text(replies[0]);
    if (typeNow !== type) {
      if (attempt >= READ_ATTEMPTS) {
        throw new CliError(
          ExitCode.REDIS,
          `The key ${JSON.stringify(key)} changed type ${READ_ATTEMPTS} times while it was read; try again.`,
        );
      }
      type = typeNow;
      continue;
    }
    return build(key, type, replies, options);
  }
}
