import { LockError, LockLostError, LockTimeoutError, ReplicationError } from '../errors.js';
import { requestKey } from '../keys.js';
import { isTransient } from '../scripts/runner.js';
import { redisError, type Calls } from './calls.js';
import { chainId, type OperationChains } from './chains.js';
import type { Events } from './events.js';
import { Hold } from './holds/hold.js';
import { retryUnreplicated, type Unreplicated } from './replication.js';
import type { Holds } from './holds/holds.js';
import type { Lease, LeaseFactory, LeaseHost } from './lease.js';
import type { Notifications } from './wait/channels.js';
import type { WaitListener, Waiter, WakeReason } from './wait/waiter.js';
import type { Telemetry } from './telemetry.js';
import { Ticket } from './ticket.js';
import type { AcquireOutcome, AcquireRequest, Target } from './types.js';
import { abortable, within } from './timing.js';
import { WaitQueue } from './wait-queue.js';

/** How long a cancelled acquire stays refused: past any late copy of it (rare, so generous). */
const CANCEL_RECORD_TTL_MS = 60_000;
/**
 * How long a lock's wait queue outlives the lease of the last waiter that joined or checked it.
 * Waiters check their place again whenever they try; an expired queue still leaves them the
 * unlock message.
 * @internal
 */
export const QUEUE_TTL_MS = 60_000;
/**
 * How long an aborted acquire waits for its clean-up (withdrawing its waiter, giving back what
 * an attempt in flight took) before it rejects; the clean-up goes on after that.
 */
const ABORT_CLEANUP_GRACE_MS = 50;

/**
 * An attempt's outcome: a hold (and the kind's proof), the PTTL of another owner's lock, or
 * (with `syncReplicas`) a grant too few replicas acknowledged, which was rolled back.
 */
type Attempt = Settled | Unreplicated;

/** An attempt that ended with the lock held or busy. */
type Settled =
  | { readonly hold: Hold; readonly proof: string | undefined }
  | { readonly hold?: undefined; readonly pttl: number };

/**
 * One acquire call: its settings, the state of its wait and what its attempts leave behind,
 * shared by its steps. While it waits, this is all that is kept of it (with its waiter and
 * ticket): no suspended function, so a process can keep many waiting at little cost.
 */
class AcquireCall implements WaitListener {
  constructor(
    readonly target: Target,
    readonly field: string,
    /** {@link chainId} of the lock's key and the owner's field. */
    readonly chain: string,
    readonly ttlMs: number,
    readonly watchdog: boolean,
    /** Monotonic time at which the wait runs out. */
    readonly deadline: number,
    /** Whether the call may wait (waitMs > 0). */
    readonly waiting: boolean,
    readonly signal: AbortSignal | undefined,
    /** Whether the call rejects when its wait runs out, rather than resolving null. */
    readonly throwOnTimeout: boolean,
    /** Its place in the lock's wait queue, for kinds that have one. */
    public ticket: Ticket | undefined,
    /** Makes the kind's lease (of the caller's lease type, which the call's promise resolves with). */
    readonly newLease: LeaseFactory<Lease>,
    /** Monotonic time the caller's call started. */
    readonly startedAt: number,
    /** Goes on with the wait after a wake-up (the acquirer's). */
    readonly resume: (call: AcquireCall, reason: WakeReason) => void,
    /** Ends the call with an error (the acquirer's). */
    readonly fail: (call: AcquireCall, error: unknown) => void,
  ) {}

  /** An attempt the caller stopped waiting for: what it took must be given back. */
  abandoned: Promise<unknown> | undefined;
  /** Its place in the local queue of the lock's channel, once it waits. */
  waiter: Waiter | undefined;
  /** Whether it ended holding the lock. */
  acquired = false;
  /** When the lock is expected to expire, as far as this waiter knows (monotonic). */
  expiresAt = Number.POSITIVE_INFINITY;
  /** The holder's PTTL in the latest busy reply, in ms (-1: no expiry); undefined before one. */
  lastPttl: number | undefined;
  /** Bound of the next wait for kinds that poll; grows after each attempt. */
  pollMs = Number.POSITIVE_INFINITY;
  /** Whether to try at once rather than wait first. */
  tryNow = false;
  /** The waiter's generation when the attempt in flight was sent. */
  generation = 0;
  /** Settle the caller's promise. */
  resolve: (lease: Lease | null) => void = noop;
  reject: (error: unknown) => void = noop;

  /**
   * See {@link WaitListener}: the wait goes on in a microtask, once whatever woke it (a message
   * handler, a timer, another waiter leaving) has returned, as after an awaited promise.
   */
  woken(reason: WakeReason): void {
    void SETTLED.then(() => this.resume(this, reason));
  }

  failed(error: unknown): void {
    void SETTLED.then(() => this.fail(this, error));
  }
}

function noop(): void {}

/**
 * A settled promise whose reactions are the wait loop's next steps: a microtask as
 * `queueMicrotask` makes one, in the same order, without its per-call async resource.
 */
const SETTLED: Promise<void> = Promise.resolve();

/** Resolves the call with `lease` or, if `failed`, rejects it with `failure`. */
function settle(call: AcquireCall, lease: Lease | null | undefined, failed: boolean, failure: unknown): void {
  if (failed) call.reject(failure);
  else call.resolve(lease ?? null);
}

/**
 * How long the caller has waited, for a message: a call that gives up says its own time, not
 * only that of its last try.
 */
function sinceStart(call: AcquireCall): string {
  return `after ${Math.round(performance.now() - call.startedAt)} ms`;
}

/** An acquire whose wait ran out: null, or a rejection for a caller that wants one. */
function noLease(call: AcquireCall): null {
  if (!call.throwOnTimeout) return null;
  const { lastPttl } = call;
  const holder =
    lastPttl === undefined
      ? ''
      : `: at the last try another owner held it, ${lastPttl < 0 ? 'with no expiry' : `with ${lastPttl} ms of its lease left`}`;
  throw new LockTimeoutError(`Timed out ${sinceStart(call)} waiting for lock "${call.target.name}"${holder}`);
}

/** @internal */
export interface AcquirerSettings {
  readonly watchdogTimeoutMs: number;
  /** This client's grant channel, named in its queue entries. */
  readonly grantChannel: string;
  /**
   * Whether waiters of kinds with a wait queue join it and are handed the lock; when not (a
   * Redis Cluster), they wait for the unlock message as the other kinds do.
   */
  readonly handOver: boolean;
  readonly isClosed: () => boolean;
  readonly assertOpen: () => void;
}

/** The parts of the engine an acquire works with. @internal */
export interface AcquirerParts {
  readonly calls: Calls;
  readonly chains: OperationChains;
  readonly holds: Holds;
  readonly notifications: Notifications;
  readonly events: Events;
  readonly leaseHost: LeaseHost;
  readonly telemetry: Telemetry;
}

/**
 * The wait loop every kind shares: try; when the lock is held, queue (kinds with a wait queue)
 * and subscribe; wake on an unlock message, a hand-over, the holder's expiry or a poll; give up
 * at the deadline or on abort, leaving no queue entry and no hold behind.
 * @internal
 */
export class Acquirer {
  readonly #settings: AcquirerSettings;
  readonly #calls: Calls;
  readonly #chains: OperationChains;
  readonly #holds: Holds;
  readonly #notifications: Notifications;
  readonly #events: Events;
  readonly #leaseHost: LeaseHost;
  readonly #telemetry: Telemetry;
  readonly #queue: WaitQueue;

  constructor(settings: AcquirerSettings, parts: AcquirerParts) {
    this.#settings = settings;
    this.#calls = parts.calls;
    this.#chains = parts.chains;
    this.#holds = parts.holds;
    this.#notifications = parts.notifications;
    this.#events = parts.events;
    this.#leaseHost = parts.leaseHost;
    this.#telemetry = parts.telemetry;
    this.#queue = new WaitQueue(parts.calls, parts.chains, parts.holds, settings.assertOpen);
  }

  /** See {@link WaitQueue.onGrant}. */
  get onGrant(): (message: string) => void {
    return this.#queue.onGrant;
  }

  /**
   * Takes `target` for the owner `field`, waiting up to `waitMs` from `startedAt` (the start of
   * the caller's call, by the monotonic clock); resolves null when the wait runs out, or rejects
   * with a {@link LockTimeoutError} then if `throwOnTimeout` is set. Rejects with `signal.reason`
   * on abort, at once, whatever is in flight.
   */
  acquire<L extends Lease>(
    target: Target,
    field: string,
    waitMs: number,
    leaseMs: number | undefined,
    signal: AbortSignal | undefined,
    newLease: LeaseFactory<L>,
    throwOnTimeout = false,
    startedAt = performance.now(),
  ): Promise<L | null> {
    const telemetry = this.#telemetry;
    if (!telemetry.enabled) {
      return this.#acquire(target, field, waitMs, leaseMs, signal, newLease, throwOnTimeout, startedAt);
    }
    return telemetry.acquire(target, waitMs, signal, () =>
      this.#acquire(target, field, waitMs, leaseMs, signal, newLease, throwOnTimeout, startedAt),
    );
  }

  #acquire<L extends Lease>(
    target: Target,
    field: string,
    waitMs: number,
    leaseMs: number | undefined,
    signal: AbortSignal | undefined,
    newLease: LeaseFactory<L>,
    throwOnTimeout: boolean,
    startedAt: number,
  ): Promise<L | null> {
    const ttlMs = leaseMs ?? this.#settings.watchdogTimeoutMs;
    const chain = chainId(target.key, field);
    // Only an acquire that may wait joins the queue, and only once this client listens for
    // hand-overs: a hand-over nobody hears is skipped, so it would be wasted.
    const call = new AcquireCall(
      target,
      field,
      chain,
      ttlMs,
      leaseMs === undefined,
      startedAt + waitMs,
      waitMs > 0,
      signal,
      throwOnTimeout,
      this.#queuing(target) && waitMs > 0 && this.#notifications.grantsReady
        ? new Ticket(target, field, ttlMs, this.#settings.grantChannel)
        : undefined,
      newLease,
      startedAt,
      this.#resume,
      this.#fail,
    );
    this.#queue.begin(chain);
    // The call resolves with what newLease made: an L.
    return new Promise<Lease | null>((resolve, reject) => {
      call.resolve = resolve;
      call.reject = reject;
      void this.#start(call);
    }) as Promise<L | null>;
  }

  /** Whether waiters of `target`'s kind join its wait queue in Redis on this client. */
  #queuing(target: Target): boolean {
    return target.protocol.queue !== undefined && this.#settings.handOver;
  }

  /**
   * The first attempt; when the lock is held by another owner and the call may wait, joins the
   * local queue (and subscribes), then hands over to the wait loop. Never rejects: it settles
   * the call.
   */
  async #start(call: AcquireCall): Promise<void> {
    const { target, signal, deadline } = call;
    const protocol = target.protocol;
    const notifications = this.#notifications;
    try {
      const channel = protocol.waitChannel?.(target, call.field) ?? target.channel;
      const generationBefore = notifications.generationOf(channel);
      const outcome = await this.#attemptCall(call);
      if (outcome.hold !== undefined) {
        this.#handOut(call, outcome);
        return;
      }
      call.lastPttl = outcome.pttl;
      if (!call.waiting) {
        this.#end(call, noLease(call));
        return;
      }
      const queue = this.#queuing(target);
      if (queue) call.ticket ??= new Ticket(target, call.field, call.ttlMs, this.#settings.grantChannel);

      this.#settings.assertOpen();
      signal?.throwIfAborted();
      const joined = notifications.join(channel, queue, protocol.wakes);
      const waiter = joined.waiter;
      call.waiter = waiter;
      this.#telemetry.waiting(target, 1);
      if (call.ticket !== undefined) call.ticket.waiter = waiter;
      if (joined.fresh || (queue && !notifications.grantsReady)) {
        // Until SUBSCRIBE is confirmed an unlock would go unheard, so try again once it is.
        await waiter.untilReady(deadline - performance.now(), signal);
        this.#settings.assertOpen();
        signal?.throwIfAborted();
      }
      // When the lock is expected to expire, as far as this waiter knows: an expired lock
      // publishes nothing, so the head of the local queue wakes up then. Kinds whose holders may
      // announce nothing also re-check at growing intervals.
      call.expiresAt = outcome.pttl >= 0 ? performance.now() + outcome.pttl : Number.POSITIVE_INFINITY;
      call.pollMs = protocol.poll?.minMs ?? Number.POSITIVE_INFINITY;
      // A first attempt sent before this client had the channel may have missed an unlock. That
      // message would have woken only the head of the local queue (unless the kind wakes more),
      // and the head is the waiter that subscribed, which tries again once it is confirmed (or,
      // leaving without the lock, wakes the next): a waiter joining behind it has nothing to redo.
      const missed =
        generationBefore === undefined
          ? protocol.wakes !== undefined || waiter.isHead
          : generationBefore !== waiter.generation;
      call.tryNow = joined.fresh || missed || (call.ticket !== undefined && call.ticket.token === undefined);
    } catch (error) {
      this.#fail(call, error);
      return;
    }
    this.#step(call, undefined);
  }

  /** Goes on with the wait loop after a wake-up. */
  readonly #resume = (call: AcquireCall, reason: WakeReason): void => {
    this.#step(call, reason);
  };

  /**
   * The wait loop, from its head or (with `woke`) from the end of a wait: runs until it has to
   * wait for a wake-up or an attempt, or the call ends. Never throws: it settles the call.
   */
  #step(call: AcquireCall, woke: WakeReason | undefined): void {
    const { signal, deadline, target } = call;
    const waiter = call.waiter as Waiter;
    let reason = woke;
    try {
      for (;;) {
        if (reason === undefined) {
          if (call.ticket?.granted === undefined && performance.now() >= deadline) {
            this.#end(call, noLease(call));
            return;
          }
          if (!call.tryNow && call.ticket?.granted === undefined) {
            const remaining = deadline - performance.now();
            if (remaining <= 0) {
              this.#end(call, noLease(call));
              return;
            }
            const untilExpiry = call.expiresAt - performance.now();
            const bound = Math.min(
              waiter.isHead ? Math.min(untilExpiry, remaining, call.pollMs) : remaining,
              target.protocol.heartbeatMs ?? Number.POSITIVE_INFINITY,
            );
            reason = waiter.waitFor(bound, signal, call);
            // Waiting: the call's woken() or failed() goes on from here.
            if (reason === undefined) return;
          }
        }
        if (reason !== undefined) {
          const ended = reason;
          reason = undefined;
          this.#settings.assertOpen();
          signal?.throwIfAborted();
          // A new head only starts watching the expiry, unless that is already due.
          if (ended === 'promoted' && call.expiresAt > performance.now()) continue;
          if (ended === 'timeout' && performance.now() >= deadline) {
            this.#end(call, noLease(call));
            return;
          }
        }
        // A hand-over heard while this owner has nothing in flight on the lock is taken here,
        // without the operation chain and its promises: the same check an attempt starts with.
        const ticket = call.ticket;
        if (
          ticket?.granted !== undefined &&
          this.#chains.idle(call.chain) &&
          this.#notifications.grantsReady
        ) {
          const granted = this.#takeGrant(call, ticket);
          if (granted !== undefined) {
            this.#handOut(call, granted);
            return;
          }
        }
        call.generation = waiter.generation;
        this.#attemptCall(call).then(
          (outcome) => this.#attempted(call, outcome),
          (error: unknown) => this.#fail(call, error),
        );
        return;
      }
    } catch (error) {
      this.#fail(call, error);
    }
  }

  /** An attempt of the wait loop came back. */
  #attempted(call: AcquireCall, outcome: Settled): void {
    try {
      if (outcome.hold !== undefined) {
        this.#handOut(call, outcome);
        return;
      }
      call.lastPttl = outcome.pttl;
      call.expiresAt = outcome.pttl >= 0 ? performance.now() + outcome.pttl : Number.POSITIVE_INFINITY;
      const poll = call.target.protocol.poll;
      if (poll !== undefined) call.pollMs = Math.min(poll.maxMs, call.pollMs * 2);
      // A message that arrived while the attempt was in flight may be the release it missed.
      call.tryNow = (call.waiter as Waiter).generation !== call.generation;
    } catch (error) {
      this.#fail(call, error);
      return;
    }
    this.#step(call, undefined);
  }

  /** Ends the call with `error`: the abort's reason as it is, anything else as a lock error. */
  readonly #fail = (call: AcquireCall, error: unknown): void => {
    const { signal } = call;
    const failure =
      signal?.aborted === true && error === signal.reason
        ? error
        : redisError(error, `waiting for lock "${call.target.name}" ${sinceStart(call)}`);
    this.#end(call, undefined, true, failure);
  };

  /**
   * Ends the call: cleans up (see {@link Acquirer.#finish}), then resolves with `lease` or, if
   * `failed`, rejects with `failure`; a call that waited and got the lock resolves first.
   */
  #end(call: AcquireCall, lease: Lease | null | undefined, failed = false, failure?: unknown): void {
    if (call.acquired && call.waiter !== undefined) {
      // A waiter that got the lock has nothing to wait for: the caller goes on first, and the
      // waiter leaves the local queue in the microtask after (before any message or timer).
      settle(call, lease, failed, failure);
      void SETTLED.then(() => this.#cleanUp(call));
      return;
    }
    const cleanUp = this.#cleanUp(call);
    if (cleanUp === undefined) {
      settle(call, lease, failed, failure);
      return;
    }
    const settled = (): void => settle(call, lease, failed, failure);
    void cleanUp.then(settled, settled);
  }

  /** {@link Acquirer.#finish}, reporting what it throws as an error event. */
  #cleanUp(call: AcquireCall): Promise<unknown> | undefined {
    try {
      return this.#finish(call);
    } catch (error) {
      // Not expected: the clean-up's own steps do not throw. The caller still hears of the call.
      this.#events.error(redisError(error, `ending an acquire of lock "${call.target.name}"`) as Error);
      return undefined;
    }
  }

  /**
   * The end of an acquire, however it went: leaves the local queue, and for a caller that gave
   * up, the wait queue in Redis and whatever an abandoned attempt took. Returns the clean-up the
   * call waits for, if any.
   */
  #finish(call: AcquireCall): Promise<unknown> | undefined {
    const { target, field, chain, signal, deadline, waiter, acquired } = call;
    const protocol = target.protocol;
    this.#queue.end(chain);
    if (waiter !== undefined) {
      waiter.leave(acquired);
      this.#telemetry.waiting(target, -1);
    }
    if (call.ticket !== undefined) call.ticket.waiter = undefined;
    // A kind with a queue of its own: an acquire that may have joined it and gave up leaves it,
    // after its last attempt, unless another acquire of the same owner still waits there.
    const leave =
      !acquired && call.waiting && !this.#queue.isAcquiring(chain) && !this.#settings.isClosed()
        ? protocol.leave?.(target, field)
        : undefined;
    const left =
      leave === undefined
        ? undefined
        : this.#chains.run(chain, () => this.#calls.idempotent(leave, (attempt) => attempt < 3));
    if (
      !acquired &&
      !this.#settings.isClosed() &&
      (call.ticket !== undefined || call.abandoned !== undefined || left !== undefined)
    ) {
      // A caller that gave up is neither queued nor holding when its call returns, as long
      // as Redis answers in time: by its deadline plus a command timeout, or within a short
      // grace after an abort. Otherwise the clean-up goes on after the call returned.
      const budget =
        signal?.aborted === true
          ? ABORT_CLEANUP_GRACE_MS
          : Number.isFinite(deadline)
            ? deadline + this.#calls.timeoutMs - performance.now()
            : this.#calls.timeoutMs;
      return within(
        Promise.all([call.ticket && this.#queue.withdraw(call.ticket), call.abandoned, left]),
        budget,
      );
    }
    return undefined;
  }

  /** An attempt; a grant too few replicas acknowledged was rolled back: again while the wait allows. */
  #attemptCall(call: AcquireCall): Promise<Settled> {
    // Without syncReplicas no grant is ever rolled back: no retry loop to set up.
    if (this.#calls.replication === undefined) return this.#attemptCallOnce(call) as Promise<Settled>;
    return retryUnreplicated(
      () => this.#attemptCallOnce(call),
      call.deadline,
      call.signal,
      this.#settings.assertOpen,
      this.#calls.timeoutMs,
    );
  }

  #attemptCallOnce(call: AcquireCall): Promise<Attempt> {
    const { ticket, signal } = call;
    const sent = this.#attempt(
      call,
      ticket !== undefined && this.#notifications.grantsReady ? ticket : undefined,
    );
    return signal === undefined ? sent : this.#abortableAttempt(call, sent, signal);
  }

  /** An attempt the caller may stop waiting for with `signal`. */
  async #abortableAttempt(call: AcquireCall, sent: Promise<Attempt>, signal: AbortSignal): Promise<Attempt> {
    try {
      return await abortable(sent, signal);
    } catch (error) {
      if (signal.aborted && error === signal.reason) {
        // What the attempt the caller stopped waiting for took must be given back.
        call.abandoned = sent.then(
          (outcome) =>
            'hold' in outcome && outcome.hold !== undefined ? this.#holds.release(outcome.hold) : undefined,
          () => undefined,
        );
        call.abandoned.catch(() => undefined);
      }
      throw error;
    }
  }

  /**
   * Ends the call with the kind's lease for a hold just taken; if the kind cannot make one, the
   * hold is given back. If the caller gave up meanwhile, the lease goes straight back too.
   */
  #handOut(call: AcquireCall, taken: { readonly hold: Hold; readonly proof: string | undefined }): void {
    const { signal, startedAt } = call;
    call.acquired = true;
    let lease: Lease;
    try {
      lease = call.newLease(taken.hold, this.#leaseHost, taken.proof);
    } catch (error) {
      this.#holds.release(taken.hold).catch(() => undefined);
      throw error;
    }
    if (this.#settings.isClosed() || signal?.aborted === true) {
      this.#giveBack(lease, startedAt, signal).then(
        (given) => this.#end(call, given),
        (error: unknown) => this.#fail(call, error),
      );
      return;
    }
    this.#acquired(lease, startedAt);
    this.#end(call, lease);
  }

  /** Granted after the caller gave up: hands the lock straight back and rejects. */
  async #giveBack<L extends Lease>(lease: L, startedAt: number, signal: AbortSignal | undefined): Promise<L> {
    await lease.release().catch(() => undefined);
    this.#settings.assertOpen();
    signal?.throwIfAborted();
    this.#acquired(lease, startedAt);
    return lease;
  }

  #acquired(lease: Lease, startedAt: number): void {
    if (this.#events.listening('acquired')) {
      this.#events.emit('acquired', {
        name: lease.name,
        key: lease.key,
        holdCount: lease.holdCount,
        waitedMs: performance.now() - startedAt,
      });
    }
  }

  /**
   * Takes the hand-over `ticket` heard, if it may be used without asking Redis: a release handed
   * the lock over after the latest attempt found this waiter queued, so the lease it set runs at
   * least from that attempt's send; with half of it left, it is held. Otherwise (or if this owner
   * took the lock meanwhile) the grant is dropped and an attempt confirms or re-enters. Runs
   * only while no other request of this owner on the lock is in flight.
   */
  #takeGrant(
    call: AcquireCall,
    ticket: Ticket,
  ): { readonly hold: Hold; readonly proof: string | undefined } | undefined {
    const { target, chain } = call;
    const proof = ticket.proof;
    // A hand-over without the proof this kind's leases carry is confirmed by an attempt instead.
    // With syncReplicas, too: the confirming attempt waits for the replicas.
    if ((proof === undefined && target.protocol.needsProof) || this.#calls.replication !== undefined) {
      ticket.granted = undefined;
      return undefined;
    }
    const now = performance.now();
    if (!ticket.takeGrant(now) || this.#holds.get(chain) !== undefined) return undefined;
    const hold = new Hold(target, call.field, call.ttlMs, call.watchdog, chain);
    hold.count = 1;
    hold.extend(ticket.sentAt);
    this.#holds.add(hold, now);
    return { hold, proof };
  }

  /** One acquire request, serialized with every other request of the same owner on this lock. */
  #attempt(call: AcquireCall, ticket: Ticket | undefined): Promise<Attempt> {
    const { target, field, chain, ttlMs, watchdog, deadline, waiting } = call;
    return this.#chains.runKeepingBusy(chain, async (keepBusy) => {
      this.#settings.assertOpen();
      const holds = this.#holds;
      if (ticket?.granted !== undefined) {
        const granted = this.#takeGrant(call, ticket);
        if (granted !== undefined) return granted;
      }
      const existing = holds.get(chain);
      const expected = existing?.count ?? 0;
      // A re-entry keeps the mode and TTL of the first acquisition.
      const hold = existing ?? new Hold(target, field, ttlMs, watchdog, chain);
      if (ticket !== undefined) this.#queue.tickets.issue(ticket, this.#calls.nextRequestId());
      const request: AcquireRequest = {
        target,
        field,
        expected,
        requestKey: requestKey(target.key, this.#calls.nextRequestId()),
        leaseMs: hold.ttlMs,
        waiter: ticket?.entry(ticket.pending) ?? '',
        queuedAs: ticket?.entry(ticket.token) ?? '',
        queueTtlMs: hold.ttlMs + QUEUE_TTL_MS,
        waiting,
      };
      const protocol = target.protocol;
      const sentAt = performance.now();
      let reply: unknown;
      let acknowledged: number;
      try {
        ({ reply, acknowledged } = await this.#calls.synced(
          protocol.acquire(request, false),
          // A call with a deadline ends by it plus one command timeout, whatever Redis does; one
          // without keeps trying through an outage (as a semaphore's or a latch's wait does) until
          // its caller aborts or the client closes.
          () => (Number.isFinite(deadline) ? performance.now() < deadline : call.signal?.aborted !== true),
          deadline + this.#calls.timeoutMs,
          // A repeated call may find the entry its first copy queued.
          () => protocol.acquire(request, true),
        ));
      } catch (error) {
        if (isTransient(error)) {
          // The request may still have been applied. Refuse any late replay of it and undo it
          // if it went through, before this owner's next request on the lock.
          keepBusy(this.#cancelAcquire(request));
          if (ticket !== undefined) {
            ticket.cancelled = true;
            this.#queue.tickets.leave(ticket, performance.now());
          }
        }
        if (ticket !== undefined) this.#queue.tickets.settle(ticket, sentAt, undefined);
        throw redisError(error, `acquiring lock "${target.name}" ${sinceStart(call)}`);
      }

      const outcome: AcquireOutcome | undefined = protocol.acquireOutcome(reply);
      if (ticket !== undefined) {
        this.#queue.tickets.settle(ticket, sentAt, outcome?.status === 'busy' ? outcome.pushed : undefined);
      }
      switch (outcome?.status) {
        case 'held': {
          const required = this.#calls.replication?.count ?? 0;
          if (acknowledged < required) {
            // Too few replicas have the grant: a failover now could hand the lock to another
            // owner. Undo it (the request key also refuses any late copy) before this owner's
            // next request on the lock, and report it to the wait loop.
            const rollback = this.#cancelAcquire(request);
            keepBusy(rollback);
            return {
              rollback,
              unreplicated: new ReplicationError(
                `Lock "${target.name}" was granted but only ${acknowledged} of the ${required} replicas required acknowledged it within ${this.#calls.replication?.timeoutMs ?? 0} ms: the grant was rolled back`,
                acknowledged,
                required,
              ),
            };
          }
          if (hold.lost) {
            // Lost while this re-entry was in flight; the clean-up queued after it drops the field.
            throw hold.lostError ?? new LockLostError(`Lock "${target.name}" was lost`, 'not-owner');
          }
          hold.count = expected + 1;
          hold.extend(sentAt);
          if (existing === undefined) holds.add(hold);
          else holds.touched(hold);
          return { hold, proof: outcome.proof };
        }
        case 'busy':
          return { pttl: outcome.pttl };
        case 'lost': {
          const message = `Lock "${target.name}" is no longer held by this owner: it was lost or changed behind its back`;
          throw existing === undefined
            ? new LockLostError(message, 'not-owner')
            : holds.markLost(existing, 'not-owner', message);
        }
        case 'refused':
          throw outcome.error(target.name);
        case 'cancelled':
          // Only a request this client gave up on is refused, and requests are never reused.
          throw new LockError(
            'REDIS_ERROR',
            `Acquire request for lock "${target.name}" was refused as cancelled`,
          );
        default:
          throw new LockError(
            'REDIS_ERROR',
            `Unexpected reply from the acquire script for lock "${target.name}"`,
          );
      }
    });
  }

  async #cancelAcquire(request: AcquireRequest): Promise<void> {
    const giveUpAt = performance.now() + request.leaseMs + CANCEL_RECORD_TTL_MS / 2;
    try {
      await this.#calls.idempotent(
        request.target.protocol.cancelAcquire(request, CANCEL_RECORD_TTL_MS),
        () => performance.now() < giveUpAt,
      );
    } catch (error) {
      this.#events.error(
        redisError(error, `cancelling an unconfirmed acquire of lock "${request.target.name}"`) as Error,
      );
    }
  }
}
