import { createHmac, randomBytes } from 'node:crypto';
import { fencingTokenKey, waitQueueKey } from '../keys.js';
import type { Connection } from './connection.js';
import { CliError, ExitCode } from './exit-codes.js';

/**
 * What a key holds, as the CLI tells it:
 * - `lock`: a hash of owner fields `<uuid>:<n>` -> hold count (latchkey's Lock, Redisson's RLock);
 * - `fenced-lock`: the same, with a fencing-token counter beside it (FencedLock, RFencedLock);
 * - `simple-lock`: a string, as `SET NX PX` locks write it (SimpleLock, redis-py, node-redlock);
 * - `free`: no key;
 * - `not-a-lock`: a key of another type, or a hash whose fields are not owner fields.
 * @internal
 */
export type LockKind = 'lock' | 'fenced-lock' | 'simple-lock' | 'free' | 'not-a-lock';

/** One owner of a hash lock. @internal */
export interface Holder {
  /**
   * 8 hex digits of an HMAC of the owner field under a key drawn at random for each run: the
   * same owner has the same label within one run (so `watch` shows who changed), and the label
   * means nothing outside it. Null for a simple lock, whose holder is just "held".
   */
  readonly label: string | null;
  readonly holdCount: number;
}

/** One entry of the wait queue; the owner field it holds is never read out. @internal */
export interface Waiter {
  /** 1 for the waiter that is handed the lock next. */
  readonly position: number;
  /** The lease the waiter asked for, in milliseconds; null for an entry the CLI cannot read. */
  readonly leaseMs: number | null;
  /** Whether the waiter's client still listens for the hand-over; a dead entry is skipped. */
  readonly listening: boolean | null;
}

/** A lock as read at one instant (one MULTI). @internal */
export interface Snapshot {
  readonly name: string;
  readonly key: string;
  readonly kind: LockKind;
  readonly held: boolean;
  readonly holders: readonly Holder[];
  /** PTTL in milliseconds; null when the key is missing or never expires. */
  readonly ttlMs: number | null;
  /** The last fencing token issued, as a decimal string; null when the lock was never fenced. */
  readonly fencingToken: string | null;
  /** Length of the wait queue. */
  readonly waiting: number;
  /** The first {@link MAX_WAITERS_SHOWN} entries of the queue (with `details`), else none. */
  readonly waiters: readonly Waiter[];
  /** What TYPE answered: `hash`, `string`, `none`, or another type. */
  readonly redisType: string;
}

/** A snapshot without the queue's entries, as `list` and `watch` print it. @internal */
export function summary(snapshot: Snapshot): Omit<Snapshot, 'waiters'> {
  const { name, key, kind, held, holders, ttlMs, fencingToken, waiting, redisType } = snapshot;
  return { name, key, kind, held, holders, ttlMs, fencingToken, waiting, redisType };
}

/** Wait-queue entries read and shown; the count is always exact. */
export const MAX_WAITERS_SHOWN = 100;
/** A hash with more fields than this is no lock: a lock has one owner, two during a hand-over. */
const MAX_OWNER_FIELDS = 64;
/** Attempts to read a key whose type keeps changing under the reader. */
const READ_ATTEMPTS = 5;

/** `<uuid>:<n>`: latchkey's `<clientId>:<ownerId>`, Redisson's `<uuid>:<threadId>`. */
const OWNER_FIELD = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}:\d+$/i;
const HOLD_COUNT = /^[1-9]\d*$/;
/** A queue entry: `<ticket> <lease ms> <grant channel> <owner field>` (see src/keys.ts). */
const QUEUE_ENTRY = /^(\S+) (\d+) (\S+) (.+)$/;

/**
 * Labels owner fields without revealing them. A keyed hash under a key drawn once per run:
 * a label printed in a ticket or a log cannot be matched against an owner field leaked
 * elsewhere, and two runs' labels cannot be linked. @internal
 */
export class HolderLabels {
  readonly #key = randomBytes(32);

  label(field: string): string {
    return createHmac('sha256', this.#key).update(field).digest('hex').slice(0, 8);
  }
}

function text(reply: unknown): string {
  if (typeof reply === 'string') return reply;
  if (Buffer.isBuffer(reply)) return reply.toString('utf8');
  return String(reply);
}

function integer(reply: unknown): number {
  return Number(text(reply));
}

/** A flat `[field, value, ...]` reply (RESP2), a Map or an object, as pairs. */
function pairs(reply: unknown): [string, string][] {
  if (Array.isArray(reply)) {
    const result: [string, string][] = [];
    for (let i = 0; i + 1 < reply.length; i += 2) result.push([text(reply[i]), text(reply[i + 1])]);
    return result;
  }
  if (reply instanceof Map) return [...reply.entries()].map(([k, v]) => [text(k), text(v)]);
  if (typeof reply === 'object' && reply !== null) {
    return Object.entries(reply).map(([k, v]) => [k, text(v)]);
  }
  return [];
}

function list(reply: unknown): unknown[] {
  return Array.isArray(reply) ? reply : [];
}

/** A key's type and layout: read TYPE first, then the commands that fit it, in one MULTI. */
interface Layout {
  readonly type: string;
  readonly pttl: number;
  readonly fields: [string, string][] | undefined;
  readonly tokenText: string | null;
  readonly waiting: number;
  readonly entries: string[];
}

async function readLayout(redis: Connection, key: string, details: boolean): Promise<Layout> {
  const queueKey = waitQueueKey(key);
  const tokenKey = fencingTokenKey(key);
  let type = text(await redis.send(['TYPE', key]));
  for (let attempt = 1; ; attempt += 1) {
    const isHash = type === 'hash';
    const commands: string[][] = [
      ['TYPE', key],
      ['PTTL', key],
      // A lock's hash is small; a big hash is no lock and is not read. HSCAN on a small hash
      // answers every field at once (cursor 0).
      ...(isHash
        ? [
            ['HLEN', key],
            ['HSCAN', key, '0', 'COUNT', String(MAX_OWNER_FIELDS * 2)],
          ]
        : []),
      ['GET', tokenKey],
      ['LLEN', queueKey],
      ...(details ? [['LRANGE', queueKey, '0', String(MAX_WAITERS_SHOWN - 1)]] : []),
    ];
    const replies = await redis.transaction(commands);
    const failed = replies.find((reply): reply is Error => reply instanceof Error);
    if (failed !== undefined) {
      // WRONGTYPE: the key changed type between TYPE and MULTI; read again.
      if (attempt < READ_ATTEMPTS && failed.message.startsWith('WRONGTYPE')) {
        type = text(await redis.send(['TYPE', key]));
        continue;
      }
      throw redis.failure(failed, `reading ${JSON.stringify(key)}`);
    }
    const [typeNow, pttl, ...rest] = replies;
    if (text(typeNow) !== type) {
      if (attempt >= READ_ATTEMPTS) {
        throw new CliError(
          ExitCode.REDIS,
          `The key ${JSON.stringify(key)} changed type ${READ_ATTEMPTS} times while it was read; try again.`,
        );
      }
      type = text(typeNow);
      continue;
    }
    let fields: [string, string][] | undefined;
    if (isHash) {
      const [hlen, scan] = rest.splice(0, 2);
      const [cursor, found] = list(scan);
      if (integer(hlen) <= MAX_OWNER_FIELDS && text(cursor) === '0') fields = pairs(found);
    }
    const [token, llen, range] = rest;
    return {
      type: text(typeNow),
      pttl: integer(pttl),
      fields,
      tokenText: token === null || token === undefined ? null : text(token),
      waiting: integer(llen),
      entries: details ? list(range).map(text) : [],
    };
  }
}

function holdersOf(fields: [string, string][] | undefined, labels: HolderLabels): Holder[] | undefined {
  if (fields === undefined || fields.length === 0) return undefined;
  const holders: Holder[] = [];
  for (const [field, count] of fields) {
    if (!OWNER_FIELD.test(field) || !HOLD_COUNT.test(count)) return undefined;
    holders.push({ label: labels.label(field), holdCount: Number(count) });
  }
  return holders;
}

async function waitersOf(redis: Connection, entries: readonly string[]): Promise<Waiter[]> {
  const parsed = entries.map((entry) => QUEUE_ENTRY.exec(entry));
  const channels = [...new Set(parsed.flatMap((match) => (match?.[3] === undefined ? [] : [match[3]])))];
  const listeners = new Map<string, number>();
  if (channels.length > 0) {
    const reply = pairs(await redis.send(['PUBSUB', 'NUMSUB', ...channels]));
    for (const [channel, count] of reply) listeners.set(channel, Number(count));
  }
  return parsed.map((match, index) => {
    const channel = match?.[3];
    return {
      position: index + 1,
      leaseMs: match?.[2] === undefined ? null : Number(match[2]),
      listening: channel === undefined ? null : (listeners.get(channel) ?? 0) > 0,
    };
  });
}

/**
 * Reads the lock at `key`: kind, holders (labelled), TTL, fencing token and wait queue. With
 * `details`, also each queued waiter's lease and whether its client still listens.
 * @internal
 */
export async function readSnapshot(
  redis: Connection,
  name: string,
  key: string,
  labels: HolderLabels,
  details: boolean,
): Promise<Snapshot> {
  const layout = await readLayout(redis, key, details);
  let kind: LockKind;
  let holders: Holder[] = [];
  switch (layout.type) {
    case 'none':
      kind = 'free';
      break;
    case 'string':
      // Any string may be a SET NX PX lock; its value is the holder's token and is never read.
      kind = 'simple-lock';
      holders = [{ label: null, holdCount: 1 }];
      break;
    case 'hash': {
      const owners = holdersOf(layout.fields, labels);
      kind = owners === undefined ? 'not-a-lock' : layout.tokenText === null ? 'lock' : 'fenced-lock';
      holders = owners ?? [];
      break;
    }
    default:
      kind = 'not-a-lock';
  }
  const held = kind === 'lock' || kind === 'fenced-lock' || kind === 'simple-lock';
  return {
    name,
    key,
    kind,
    held,
    holders,
    ttlMs: layout.pttl >= 0 ? layout.pttl : null,
    fencingToken: layout.tokenText,
    waiting: layout.waiting,
    waiters: details ? await waitersOf(redis, layout.entries) : [],
    redisType: layout.type,
  };
}
