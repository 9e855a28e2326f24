import { readerTimeoutPrefix } from '../../keys.js';
import { row } from '../format.js';
import type { Probe } from '../probe.js';
import type { Holder, Snapshot } from '../model.js';
import { HOLD_COUNT, holderParts, holderRows, OWNER_FIELD } from './common.js';
import type { Layout, ReadContext } from './types.js';

const MODE = 'mode';
const WRITE_SUFFIX = ':write';
/** A reader's lease keys read per reader: its first holds, enough to show when its lease ends. */
const MAX_LEASES_READ = 100;

interface Field {
  readonly owner: string;
  readonly role: 'reader' | 'writer';
  readonly count: number;
}

/** The hash's holders, when it is a read-write lock's: `mode`, readers and writers; else undefined. */
function fieldsOf(probe: Probe): Field[] | undefined {
  if (probe.type !== 'hash' || probe.fields === undefined) return undefined;
  let mode: string | undefined;
  const fields: Field[] = [];
  for (const [field, value] of probe.fields) {
    if (field === MODE) {
      mode = value;
      continue;
    }
    const writer = field.endsWith(WRITE_SUFFIX);
    const owner = writer ? field.slice(0, -WRITE_SUFFIX.length) : field;
    if (!OWNER_FIELD.test(owner) || !HOLD_COUNT.test(value)) return undefined;
    fields.push({ owner, role: writer ? 'writer' : 'reader', count: Number(value) });
  }
  return mode === 'read' || mode === 'write' ? fields : undefined;
}

/** The longest PTTL among each reader's lease keys `{<key>}:<owner>:rwlock_timeout:<n>` (-2: none). */
async function readerLeases(probe: Probe, fields: readonly Field[], context: ReadContext): Promise<number[]> {
  const commands = fields.map((field) => {
    if (field.role !== 'reader') return [];
    const prefix = readerTimeoutPrefix(probe.key, field.owner);
    const holds = Math.min(field.count, MAX_LEASES_READ);
    return Array.from({ length: holds }, (_, n) => ['PTTL', `${prefix}:${n + 1}`]);
  });
  const flat = commands.flat();
  const replies = flat.length === 0 ? [] : await context.redis.transaction(flat);
  let next = 0;
  return commands.map((keys) => {
    const pttls = replies.slice(next, next + keys.length).map(Number);
    next += keys.length;
    return Math.max(-2, ...pttls);
  });
}

function modeOf(probe: Probe): 'read' | 'write' {
  return probe.fields?.find(([field]) => field === MODE)?.[1] === 'write' ? 'write' : 'read';
}

function holdersText(snapshot: Snapshot): string {
  return snapshot.held ? `${snapshot.holders.length} ${snapshot.mode ?? ''}`.trim() : '-';
}

/**
 * ReadWriteLock and RReadWriteLock: one hash with `mode` (`read` or `write`), reader fields
 * `<owner> -> count`, writer fields `<owner>:write -> count`, a lease key per read hold
 * `{<key>}:<owner>:rwlock_timeout:<n>`, and latchkey's waiting writers `latchkey_writers:{<key>}`.
 */
export const READ_WRITE_LOCK: Layout = {
  kind: 'read-write-lock',
  recognize: (probe) => fieldsOf(probe) !== undefined,
  async read(probe, context) {
    const fields = fieldsOf(probe) ?? [];
    const leases = context.details ? await readerLeases(probe, fields, context) : [];
    const holders: Holder[] = fields.map((field, index) => {
      const lease = leases[index];
      return {
        // A writer and its own read holds (a downgrade) share a label: they are one owner.
        label: context.labels.label(field.owner),
        holdCount: field.count,
        role: field.role,
        leaseMs: lease === undefined || lease < 0 ? null : lease,
      };
    });
    // Writers first, then readers, each in the hash's order.
    holders.sort((a, b) => (a.role === b.role ? 0 : a.role === 'writer' ? -1 : 1));
    return { holders, mode: modeOf(probe), waiting: probe.waitingWriters };
  },
  title: () => 'read-write lock',
  rows: (snapshot) => [
    row('mode', snapshot.mode ?? '-'),
    ...holderRows(snapshot),
    row('waiting', `${snapshot.waiting} (writers queued by latchkey)`),
  ],
  parts: (snapshot) => [
    `mode ${snapshot.mode ?? '-'}`,
    ...holderParts(snapshot),
    `writers waiting ${snapshot.waiting}`,
  ],
  cells: (snapshot) => ({ holders: holdersText(snapshot), count: '-' }),
  unlock: {
    action: 'unlock',
    handle: (locks, name) => locks.readWriteLock(name),
    effect:
      'Every reader and the writer lose it (a latchkey holder notices at its next renewal or when its lease ends), and every waiting reader and writer is woken.',
    nothingHeld: 'nobody holds it',
  },
};
