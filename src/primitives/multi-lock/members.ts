import { handleParts, LockHandle, type Engine, type Lease } from '../../engine/index.js';
import { InvalidArgumentError, LockReentryError } from '../../errors.js';
import { currentContext } from '../../owner.js';
import { describe } from '../../validate.js';

/**
 * A handle a multi-lock can hold: a {@link Lock}, {@link FencedLock}, {@link FairLock},
 * {@link SimpleLock}, or the {@link ReadLock} or {@link WriteLock} of a read-write lock.
 */
export type MemberHandle = LockHandle<Lease>;

/** The leases a multi-lock over `H` hands out, one per handle, in the order of the handles. */
export type LeasesOf<H extends readonly MemberHandle[]> = {
  readonly [K in keyof H]: H[K] extends LockHandle<infer L> ? L : never;
};

/** One member of a multi-lock. @internal */
export interface Member {
  readonly handle: LockHandle<Lease>;
  /** Its place in the list the caller gave. */
  readonly index: number;
  /** See {@link HandleParts.heldKey}. */
  readonly heldKey: string | undefined;
}

/**
 * The kinds a multi-lock takes: the locks, each held by one owner at a time (or by readers
 * together). A permit semaphore's handle is a lock handle too, but not a lock.
 */
const MEMBER_KINDS: ReadonlySet<string> = new Set([
  'lock',
  'fenced-lock',
  'fair-lock',
  'simple-lock',
  'read-lock',
  'write-lock',
]);

const EXPECTED_HANDLE =
  'a lock handle of this LockClient (lock, fencedLock, fairLock, simpleLock, or readWriteLock(name).readLock() or .writeLock())';

/** The value, for a message: an object by its class, so that a semaphore says it is one. */
function shown(value: unknown): string {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return describe(value);
  const name = (value as { constructor?: { name?: unknown } }).constructor?.name;
  return typeof name === 'string' && name !== '' && name !== 'Object' ? `a ${name}` : describe(value);
}

/**
 * Checks a multi-lock's handles, before anything is sent: a non-empty array of lock handles
 * made by the client of `engine`, each on a key of its own. Returns its members in the order
 * they are taken: by key, the same order in every process, so that two multi-locks sharing
 * locks never each hold what the other waits for.
 * @internal
 */
export function checkMembers(engine: Engine, handles: unknown): readonly Member[] {
  if (!Array.isArray(handles)) {
    throw new InvalidArgumentError(
      `Expected \`handles\` to be an array of lock handles, got ${shown(handles)}`,
    );
  }
  if (handles.length === 0) {
    throw new InvalidArgumentError('Expected `handles` to hold at least one lock handle, got an empty array');
  }
  const byKey = new Map<string, number>();
  const members = (handles as unknown[]).map((given, index): Member => {
    const parts = given instanceof LockHandle ? handleParts(given as MemberHandle) : undefined;
    if (parts === undefined || !MEMBER_KINDS.has(parts.kind)) {
      throw new InvalidArgumentError(
        `Expected \`handles[${index}]\` to be ${EXPECTED_HANDLE}, got ${shown(given)}`,
      );
    }
    const handle = given as MemberHandle;
    if (parts.engine !== engine) {
      throw new InvalidArgumentError(
        `\`handles[${index}]\` (lock "${handle.name}") was made by another LockClient; every member of a multi-lock must come from the LockClient whose multiLock() is called`,
      );
    }
    const earlier = byKey.get(handle.key);
    if (earlier !== undefined) {
      throw new InvalidArgumentError(
        `\`handles[${earlier}]\` and \`handles[${index}]\` are both on the key of lock "${handle.name}": a multi-lock takes each key once (the read and write locks of one read-write lock share a key)`,
      );
    }
    byKey.set(handle.key, index);
    return { handle, index, heldKey: parts.heldKey };
  });
  return members.sort((a, b) => (a.handle.key < b.handle.key ? -1 : 1));
}

/**
 * Refuses, before anything is sent, a multi-lock whose non-reentrant member the calling async
 * context already holds: its acquire would wait for itself.
 * @internal
 */
export function checkReentry(members: readonly Member[]): void {
  const held = currentContext()?.nonReentrant;
  if (held === undefined || held.size === 0) return;
  for (const { handle, heldKey } of members) {
    if (heldKey !== undefined && held.has(heldKey)) {
      throw new LockReentryError(
        `Lock "${handle.name}" of this multi-lock is not reentrant and is already held by this async context; taking it again would wait for itself`,
      );
    }
  }
}
