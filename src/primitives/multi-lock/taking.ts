import {
  ABORT_CLEANUP_GRACE_MS,
  unwatchAbort,
  watchAbort,
  within,
  type AbortWatcher,
  type CheckedAcquire,
  type Lease,
} from '../../engine/index.js';
import { LockTimeoutError } from '../../errors.js';
import type { Member } from './members.js';

/** One call taking every member of a multi-lock, and what it holds so far. */
interface Take {
  /** In the order they are taken (by key). */
  readonly members: readonly Member[];
  readonly checked: CheckedAcquire;
  readonly startedAt: number;
  /** Monotonic time at which the wait runs out. */
  readonly deadline: number;
  readonly commandTimeoutMs: number;
  readonly isClosed: () => boolean;
  /** The leases held: always of the first members in order, never of a later one alone. */
  readonly held: Lease[];
  /** Releases under way of members taken out of order, which are given back at once. */
  readonly givingBack: Promise<unknown>[];
  /** The member the take stopped at, last. */
  busy: Member | undefined;
}

/** What takeAll() needs of the multi-lock's client. */
export interface TakeHost {
  readonly commandTimeoutMs: number;
  readonly closed: boolean;
}

/**
 * Takes every member, all or nothing. Each round tries every member not yet held at once, so
 * that members on one Redis node that are all free are taken in one round trip (the commands
 * leave together); it keeps the leading members it got, in order, and gives back the others at
 * once, then waits for the first member it did not get with that member's own acquire (woken as
 * any waiter of its kind) for what is left of `waitMs`, and goes on with the next round. It never
 * waits while holding a member that comes after the one it waits for, so two multi-locks sharing
 * locks, whatever order their callers listed them in, cannot wait for each other.
 *
 * Resolves with the leases in the caller's order, or null when the wait runs out (a
 * {@link LockTimeoutError} with `throwOnTimeout`); however it gives up (timeout, abort, closed
 * client, error), what it held is released before it returns, within the bound of a single
 * lock's clean-up: the call's deadline plus a command timeout, or a short grace after an abort.
 * @internal
 */
export async function takeAll(
  members: readonly Member[],
  checked: CheckedAcquire,
  host: TakeHost,
  throwOnTimeout: boolean,
): Promise<Lease[] | null> {
  const startedAt = performance.now();
  const take: Take = {
    members,
    checked,
    startedAt,
    deadline: startedAt + checked.waitMs,
    commandTimeoutMs: host.commandTimeoutMs,
    isClosed: () => host.closed,
    held: [],
    givingBack: [],
    busy: undefined,
  };
  const { signal } = checked;
  // An abort gives back what is held at once, while the member in flight cleans up after itself.
  const onAbort: AbortWatcher = { handleEvent: () => startGivingBack(take) };
  if (signal !== undefined) watchAbort(signal, onAbort);
  let done: boolean;
  try {
    done = await takeInOrder(take);
    // The last member came back granted, but the caller gave up meanwhile.
    signal?.throwIfAborted();
  } catch (error) {
    await giveBack(take, failureBudget(take));
    throw error;
  } finally {
    if (signal !== undefined) unwatchAbort(signal, onAbort);
  }
  if (done) return inCallerOrder(take);
  await giveBack(take, take.deadline + take.commandTimeoutMs - performance.now());
  if (throwOnTimeout) throw timeoutError(take);
  return null;
}

/** Rounds and waits until every member is held (true) or the wait ran out (false). */
async function takeInOrder(take: Take): Promise<boolean> {
  const { members, checked } = take;
  for (;;) {
    await tryTheRest(take);
    const next = members[take.held.length];
    if (next === undefined) return true;
    take.busy = next;
    const remaining = take.deadline - performance.now();
    if (remaining <= 0) return false;
    const lease = await next.handle.tryAcquire({
      waitMs: Number.isFinite(remaining) ? Math.ceil(remaining) : remaining,
      leaseMs: checked.leaseMs,
      signal: checked.signal,
    });
    if (lease === null) return false;
    take.held.push(lease);
  }
}

/**
 * One try of every member not yet held, all sent at once. The leading members taken join the
 * held ones; any taken after the first that was not are given back at once. Throws the first
 * failure in order, if any.
 */
async function tryTheRest(take: Take): Promise<void> {
  const { leaseMs, signal } = take.checked;
  const options = { waitMs: 0, leaseMs, signal };
  const rest = take.members.slice(take.held.length);
  const tries = await Promise.allSettled(rest.map((member) => member.handle.tryAcquire(options)));
  let inOrder = true;
  let failure: PromiseRejectedResult | undefined;
  for (const tried of tries) {
    const lease = tried.status === 'fulfilled' ? tried.value : null;
    if (lease !== null && inOrder) {
      take.held.push(lease);
      continue;
    }
    inOrder = false;
    if (lease !== null) take.givingBack.push(lease.release().catch(() => undefined));
    if (tried.status === 'rejected') failure ??= tried;
  }
  if (failure !== undefined) throw failure.reason;
}

/** How long a take that failed waits for its releases: as a single lock's acquire does. */
function failureBudget(take: Take): number {
  if (take.checked.signal?.aborted === true || take.isClosed()) return ABORT_CLEANUP_GRACE_MS;
  return Number.isFinite(take.deadline)
    ? Math.max(take.deadline + take.commandTimeoutMs - performance.now(), ABORT_CLEANUP_GRACE_MS)
    : take.commandTimeoutMs;
}

/** Starts releasing every lease held; {@link giveBack} waits for those releases. */
function startGivingBack(take: Take): void {
  for (const lease of take.held.splice(0)) take.givingBack.push(lease.release().catch(() => undefined));
}

/**
 * Releases every lease held, and waits up to `budgetMs` for those releases and the ones under
 * way. A release Redis does not confirm leaves its lock to expire within its lease: the watchdog
 * stops renewing it as the release starts.
 */
async function giveBack(take: Take, budgetMs: number): Promise<void> {
  startGivingBack(take);
  await within(Promise.all(take.givingBack), budgetMs);
}

function inCallerOrder(take: Take): Lease[] {
  const leases = new Array<Lease>(take.members.length);
  take.members.forEach((member, i) => {
    leases[member.index] = take.held[i] as Lease;
  });
  return leases;
}

function timeoutError(take: Take): LockTimeoutError {
  const waited = Math.round(performance.now() - take.startedAt);
  const busy =
    take.busy === undefined ? '' : `: lock "${take.busy.handle.name}" stayed held by another owner`;
  return new LockTimeoutError(
    `Timed out after ${waited} ms taking a multi-lock of ${take.members.length} locks${busy}`,
  );
}
