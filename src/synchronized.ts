import { LockClient } from './client.js';
import { InvalidArgumentError } from './errors.js';
import type { AcquireOptions } from './options.js';
import { checkBoolean, checkOptions, describe } from './validate.js';

/** Which kind of lock a {@link synchronized} method takes. */
export type SynchronizedKind = 'lock' | 'fencedLock' | 'simpleLock';

/**
 * Options of {@link synchronized}: the acquire options every call uses, plus the lock's kind.
 *
 * @example
 * ```ts
 * @synchronized(locks, (orderId: string) => `order:${orderId}`, { waitMs: 5_000 })
 * async ship(orderId: string): Promise<void> { ... }
 * ```
 */
export interface SynchronizedOptions extends Omit<AcquireOptions, 'signal'> {
  /**
   * The kind of lock to take.
   * @defaultValue `'lock'`
   */
  readonly kind?: SynchronizedKind;
  /**
   * For `'lock'` and `'fencedLock'`: whether a method may re-enter a lock its call chain holds.
   * @defaultValue true
   */
  readonly reentrant?: boolean;
}

const OPTIONS = ['kind', 'reentrant', 'waitMs', 'leaseMs'] as const;
const KINDS: readonly SynchronizedKind[] = ['lock', 'fencedLock', 'simpleLock'];

/** Where a decorated method finds its LockClient: one client, or one per instance. */
export type SynchronizedClient<This> = LockClient | ((self: This) => LockClient);

/**
 * A decorator (TypeScript 5 standard decorators) that runs an async method inside
 * `withLock`: each call takes the lock `name(...args)` (or `name`, when it is a string), runs
 * the method as its owner, and releases it however the method ends — the way a Java or Python
 * service wraps a function in a lock. Calls of the method, or of other methods on the same
 * name, exclude each other across processes; a nested call re-enters a reentrant lock.
 *
 * The lock's lease is not passed to the method; use `withLock` directly when the work needs
 * `lease.signal` or a fencing token.
 *
 * @param locks - the LockClient, or a function that returns it for the instance (`this`).
 * @param name - the lock's name, or a function of the method's arguments that returns it.
 * @param options - see {@link SynchronizedOptions}.
 * @throws {@link InvalidArgumentError} when the decorator is applied with bad arguments or to
 *   something other than a method; each call rejects as `withLock` does (a bad name included).
 * @example
 * ```ts
 * class Invoices {
 *   @synchronized(locks, (id: number) => `invoice:${id}`)
 *   async issue(id: number): Promise<void> {
 *     await renderAndSend(id);
 *   }
 * }
 * ```
 */
export function synchronized<This, Args extends unknown[], R>(
  locks: SynchronizedClient<This>,
  name: string | ((...args: Args) => string),
  options?: SynchronizedOptions,
): (
  method: (this: This, ...args: Args) => Promise<R>,
  context: ClassMethodDecoratorContext<This, (this: This, ...args: Args) => Promise<R>>,
) => (this: This, ...args: Args) => Promise<R> {
  if (!(locks instanceof LockClient) && typeof locks !== 'function') {
    throw new InvalidArgumentError(
      `Expected \`locks\` to be a LockClient or a function returning one, got ${describe(locks)}`,
    );
  }
  if (typeof name !== 'string' && typeof name !== 'function') {
    throw new InvalidArgumentError(
      `Expected \`name\` to be a lock name or a function of the method's arguments, got ${describe(name)}`,
    );
  }
  const given = checkOptions('options', options, OPTIONS);
  const kind = given.kind ?? 'lock';
  if (!KINDS.includes(kind as SynchronizedKind)) {
    throw new InvalidArgumentError(
      `Expected \`kind\` to be one of ${KINDS.map((k) => `'${k}'`).join(', ')}, got ${describe(kind)}`,
    );
  }
  const reentrant = given.reentrant === undefined ? undefined : checkBoolean('reentrant', given.reentrant);
  if (kind === 'simpleLock' && reentrant === true) {
    throw new InvalidArgumentError(
      'A simple lock is never reentrant; leave out `reentrant` or pick another kind',
    );
  }
  // waitMs and leaseMs are checked by withLock on every call, before any command.
  const acquire: AcquireOptions = {
    ...(given.waitMs === undefined ? {} : { waitMs: given.waitMs as number }),
    ...(given.leaseMs === undefined ? {} : { leaseMs: given.leaseMs as number }),
  };

  return (method, context) => {
    if (context.kind !== 'method') {
      throw new InvalidArgumentError(`@synchronized applies to methods, not to a ${String(context.kind)}`);
    }
    return function (this: This, ...args: Args): Promise<R> {
      let client: LockClient;
      let lockName: string;
      try {
        client = locks instanceof LockClient ? locks : locks(this);
        if (!(client instanceof LockClient)) {
          throw new InvalidArgumentError(
            `Expected the \`locks\` function of @synchronized to return a LockClient, got ${describe(client)}`,
          );
        }
        lockName = typeof name === 'string' ? name : name(...args);
      } catch (error) {
        return Promise.reject(error);
      }
      const run = (): Promise<R> => method.apply(this, args);
      try {
        switch (kind) {
          case 'simpleLock':
            return client.simpleLock(lockName).withLock(run, acquire);
          case 'fencedLock':
            return client.fencedLock(lockName, { reentrant: reentrant ?? true }).withLock(run, acquire);
          default:
            return client.lock(lockName, { reentrant: reentrant ?? true }).withLock(run, acquire);
        }
      } catch (error) {
        // A bad name: rejected before any command, like every other call.
        return Promise.reject(error);
      }
    };
  };
}
