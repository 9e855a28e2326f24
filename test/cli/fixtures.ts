/**
 * Locks held in the test process for the CLI to look at, and the secrets the CLI must never
 * print, read straight from Redis. Key names are spelt out (not taken from src/keys.ts), so a
 * renamed key fails the tests.
 */
import { RESP_TYPES } from 'redis';
import type { AcquireOptions, Lease, LockHandle } from '../../src/index.js';
import { fairQueueOf, queueOf } from '../support/keys.js';
import type { KindName } from '../support/kinds.js';
import type { Redis } from '../support/resources.js';
import { waitUntil } from '../support/wait.js';

/** A permit semaphore's permits out, for a key without a hash tag. */
export function permitTimeoutKeyOf(key: string): string {
  return `{${key}}:timeout`;
}

/**
 * The kind the CLI names for each test fixture kind while one holds it, and once the holder
 * released it. A fair lock nobody waits for has a plain lock's layout; a permit semaphore keeps
 * its counter, which `watch` goes on reading as the permit semaphore it saw.
 */
export const CLI_KIND_OF: Readonly<Record<KindName, { readonly held: string; readonly released: string }>> = {
  lock: { held: 'lock', released: 'free' },
  fencedLock: { held: 'fenced-lock', released: 'free' },
  simpleLock: { held: 'simple-lock', released: 'free' },
  fairLock: { held: 'lock', released: 'free' },
  permitSemaphore: { held: 'permit-semaphore', released: 'permit-semaphore' },
  readLock: { held: 'read-write-lock', released: 'free' },
  writeLock: { held: 'read-write-lock', released: 'free' },
};

/** The `--prefix` a handle was made with: its key minus its name. */
export function prefixOf(handle: { readonly key: string; readonly name: string }): string {
  return handle.key.slice(0, handle.key.length - handle.name.length);
}

export interface NestedHold {
  /** Leaves every level; resolves once the lock was released. */
  release(): Promise<void>;
}

/**
 * Holds `handle` from `depth` nested `withLock` calls of one async context (hold count `depth`
 * for a reentrant lock) until `release()`.
 */
export async function holdNested(
  handle: LockHandle<Lease>,
  depth: number,
  options?: AcquireOptions,
): Promise<NestedHold> {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  let entered!: () => void;
  const inside = new Promise<void>((resolve) => {
    entered = resolve;
  });
  const nest = async (level: number): Promise<void> => {
    await handle.withLock(async () => {
      if (level < depth) {
        await nest(level + 1);
      } else {
        entered();
        await gate;
      }
    }, options);
  };
  const done = nest(1);
  await Promise.race([inside, done]);
  return {
    release: async () => {
      open();
      await done;
    },
  };
}

/** Waits until the lock's wait queue holds `length` entries. */
export async function waitForQueue(admin: Redis, key: string, length: number): Promise<void> {
  await waitUntil(
    `the queue of ${key} holds ${length} entries`,
    async () => (await admin.lLen(queueOf(key))) === length,
  );
}

/**
 * What must never appear in the CLI's output for the lock at `key`: the owner fields of a hash
 * and their client ids (a read-write lock's `mode` is none), a string's token (a counter is
 * none), a permit semaphore's permit ids, and the entries of the wait queue and the fair queue
 * and their parts.
 */
export async function secretsOf(admin: Redis, key: string): Promise<string[]> {
  const type = await admin.type(key);
  const secrets: string[] = [];
  if (type === 'hash') {
    for (const field of await admin.hKeys(key)) {
      if (field !== 'mode') secrets.push(field, field.split(':')[0] ?? field);
    }
  } else if (type === 'string') {
    const value = (await admin.get(key)) ?? '';
    if (!/^-?\d+$/.test(value)) secrets.push(value);
  }
  const permitIds = await admin.sendCommand<Buffer[]>(['ZRANGE', permitTimeoutKeyOf(key), '0', '-1'], {
    typeMapping: { [RESP_TYPES.BLOB_STRING]: Buffer },
  });
  for (const id of permitIds) secrets.push(id.toString('hex'), id.toString('latin1'));
  for (const entry of [
    ...(await admin.lRange(queueOf(key), 0, -1)),
    ...(await admin.lRange(fairQueueOf(key), 0, -1)),
  ]) {
    secrets.push(entry, ...entry.split(/[ :]/).filter((part) => part.length >= 8));
  }
  if (secrets.length === 0) throw new Error(`no secrets found for ${key}: is the lock held?`);
  return secrets;
}
