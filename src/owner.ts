import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * The async task a critical section runs in. Every async descendant of a `withLock` callback
 * sees the same context, so it re-enters the locks its ancestors hold.
 * @internal
 */
export interface OwnerContext {
  /** Identity of the task for reentrant locks; part of the owner field, never shown to users. */
  readonly ownerId: string;
  /**
   * Non-reentrant locks held by this task, by client id + key: taking one of them again from
   * the same task would wait for itself, so it is rejected instead.
   */
  readonly nonReentrant: ReadonlySet<string>;
}

const storage = new AsyncLocalStorage<OwnerContext>();

// Owner ids only need to be unique within one client id, and a client id is a random UUID.
let nextOwnerId = 1;

/** @internal */
export function newOwnerId(): string {
  const id = nextOwnerId;
  nextOwnerId += 1;
  return String(id);
}

/** @internal */
export function currentContext(): OwnerContext | undefined {
  return storage.getStore();
}

/** @internal */
export function runInContext<T>(context: OwnerContext, fn: () => T): T {
  return storage.run(context, fn);
}
