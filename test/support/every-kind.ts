/**
 * Every kind a LockClient hands out, as something to wait for: one fixture per kind — the locks,
 * both halves of a read-write lock, the semaphores and the count-down latch — so that a test of a
 * behaviour every kind promises is written once and run over `EVERY_KIND` with `describe.each`.
 * A kind added here inherits every shared suite.
 *
 * A fixture says how to make the resource unavailable to a waiter and, for EACH event that frees
 * capacity of that kind, how to block it so that this event frees it; how to wait for it (acquire
 * or await, with `waitMs` and `signal`); how its `waitMs` running out shows; one write whose
 * retries must take effect once; and, in `applies`, which shared behaviours it promises — or, in
 * one place, why a behaviour does not apply to it.
 *
 * Channel and key names are spelt out here and in kinds.ts rather than taken from src/keys.ts, so
 * a renamed one fails the tests. They assume a key without a hash tag, as the tests' keys are.
 */
import type { Lease, LockClient, PermitSemaphore, Semaphore, WriteLock } from '../../src/index.js';
import {
  FAIR_LOCK,
  FENCED_LOCK,
  LOCK,
  PERMIT_SEMAPHORE,
  READ_LOCK,
  SIMPLE_LOCK,
  WRITE_LOCK,
  type Kind,
  type KindName,
} from './kinds.js';
import type { Redis } from './resources.js';

/**
 * The behaviours the README and docs/ promise for every kind. A shared suite of each runs over
 * `EVERY_KIND`; a fixture's `applies` says for each whether it holds for that kind, or why not.
 */
export type Behaviour =
  /** An acquire or await keeps trying through a Redis outage within its `waitMs`. */
  | 'outage'
  /** A waiter parked on pub/sub is woken promptly by every event that frees capacity. */
  | 'wakeUp'
  /** A holder frozen past its lease sees it lost at its first check after it resumes. */
  | 'lossAfterFreeze'
  /** An abort ends a wait promptly, parked or with an attempt in flight, and leaves nothing. */
  | 'abort'
  /** `waitMs` ends a wait near its time and leaves nothing. */
  | 'waitMs'
  /** A write whose reply is lost (its connection killed mid-call) takes effect once. */
  | 'idempotentRetries'
  /** SCRIPT FLUSH between calls and during a wait changes nothing a caller sees. */
  | 'scriptFlush'
  /** A waiter whose subscriber connection is killed still gets the resource when it frees. */
  | 'connectionKill'
  /** Spans and metrics through OpenTelemetry. */
  | 'telemetry'
  /** The operator CLI lists, inspects and watches the kind's layout. */
  | 'cli';

export const BEHAVIOURS: readonly Behaviour[] = [
  'outage',
  'wakeUp',
  'lossAfterFreeze',
  'abort',
  'waitMs',
  'idempotentRetries',
  'scriptFlush',
  'connectionKill',
  'telemetry',
  'cli',
];

/** `true`: the behaviour holds for the kind; a string: why it does not apply. */
export type Applies = Readonly<Record<Behaviour, true | string>>;

export type WaitableName = KindName | 'semaphore' | 'countDownLatch';

/** The fixed lease of blocks freed by their lease (or TTL) running out, in ms. */
export const EXPIRY_MS = 600;

/** Where a test plays out: clients under one key prefix, and the resource's name and key. */
export interface Scene {
  /** The client that blocks the resource (holds, takes permits, sets the count). */
  readonly holder: LockClient;
  /** A third party: an operator's forceUnlock, a release by permit id, a new count. */
  readonly other: LockClient;
  /** The test's own connection. */
  readonly admin: Redis;
  readonly name: string;
  /** The resource's key: the clients' key prefix + `name`. */
  readonly key: string;
}

/** A resource made unavailable by {@link FreeEvent.block}. */
export interface Blocked {
  /**
   * Makes the event happen. For an `expiry` event, nothing to do: the lease or TTL runs out on its
   * own {@link EXPIRY_MS} after the block.
   */
  free(): Promise<void>;
}

/** One event that frees capacity of a kind. */
export interface FreeEvent {
  /** What happens, as a test name shows it. */
  readonly event: string;
  /**
   * `message`: it publishes, and a parked waiter is woken by that message. `expiry`: nothing is
   * published (a lease or TTL runs out); a parked waiter re-checks when it ends.
   */
  readonly wakes: 'message' | 'expiry';
  /** Makes the resource unavailable in the way this event then frees. */
  block(scene: Scene): Promise<Blocked>;
}

/** What a wait got: the hold, permit or open latch; `give()` gives back what it took. */
export interface Got {
  give(): Promise<void>;
}

export interface WaitOptions {
  readonly waitMs?: number;
  readonly signal?: AbortSignal;
}

/** A write whose reply may be lost, and the one number it changes by one step. */
export interface OnceCall {
  /** What the call is, as a test name shows it. */
  readonly what: string;
  /** Readies the resource so that the call changes its level by `step`. */
  ready(scene: Scene): Promise<void>;
  /** The call, on the client whose connection is killed. */
  call(locks: LockClient, name: string): Promise<unknown>;
  /** The number the call changes: holds, permits taken, the latch's count. */
  level(admin: Redis, key: string): Promise<number>;
  readonly step: 1 | -1;
}

export interface Waitable {
  readonly name: WaitableName;
  /** The hold kind's fixture (kinds.ts), for the kinds that have one. */
  readonly kind: Kind | undefined;
  /** The shared behaviours this kind promises; a string says why one does not apply. */
  readonly applies: Applies;
  /** The channel a waiter listens on; a pattern (`*`) where each waiter has a channel of its own. */
  channel(key: string): string;
  /**
   * Why a parked waiter of this kind also re-checks on a timer of its own, beside the message
   * (undefined: it waits for a message, its holder's PTTL or a deadline it knows, never polls).
   */
  readonly polls?: string;
  /** Every event that frees capacity of this kind; the first is the plain one (a release). */
  readonly frees: readonly [FreeEvent, ...FreeEvent[]];
  /**
   * Makes the resource available without any wait (a lock: nothing to do; a semaphore: a counter
   * with a free permit; the latch: no latch, which is open).
   */
  available(scene: Scene): Promise<void>;
  /**
   * Waits until the resource is available and takes it (acquire, or await for the latch); rejects
   * as the kind's API does when `waitMs` runs out or `signal` aborts.
   */
  wait(locks: LockClient, name: string, options: WaitOptions): Promise<Got>;
  /**
   * How `waitMs` running out shows in the kind's API: a LockTimeoutError, or a `false` answer
   * from the latch's await, which {@link Waitable.wait} turns into a {@link LatchClosed} rejection.
   */
  readonly timesOut: 'LockTimeoutError' | 'false';
  /** A write that must take effect once, however often it is retried. */
  readonly once: OnceCall;
}

/** Whether `behaviour` holds for `waitable`, for `it.skipIf` / `describe.skipIf`. */
export function skips(waitable: Waitable, behaviour: Behaviour): boolean {
  return waitable.applies[behaviour] !== true;
}

/** A test name that shows, for a behaviour that does not apply, why. */
export function titled(waitable: Waitable, behaviour: Behaviour, title: string): string {
  const applies = waitable.applies[behaviour];
  return applies === true ? title : `${title} — does not apply: ${applies}`;
}

/**
 * Every key of the resource at `key` (the key, and every key with `{<key>}` in its name: wait
 * queues, fair-lock deadlines, waiting writers, reader leases, permit leases), with its type and
 * contents, sorted: equal before a waiter came and after it left means it left nothing. Request
 * records are left out (they expire on their own), as is a fenced lock's token counter (every
 * attempt that took the lock counts one, and it never goes back, on purpose), and so are PTTLs and
 * the scores of sorted sets (deadlines and lease ends that renewals move).
 */
export async function residue(admin: Redis, key: string): Promise<string[]> {
  const names = new Set<string>();
  for await (const batch of admin.scanIterator({ MATCH: `*{${key}}*`, COUNT: 1_000 })) {
    for (const name of batch) {
      if (!name.startsWith('latchkey_request') && !name.startsWith('redisson_lock_token')) names.add(name);
    }
  }
  if (Number(await admin.exists(key)) === 1) names.add(key);
  const entries: string[] = [];
  for (const name of [...names].sort()) {
    const type = String(await admin.type(name));
    let contents: unknown;
    if (type === 'hash') contents = Object.entries(await admin.hGetAll(name)).sort();
    else if (type === 'zset') contents = (await admin.zRange(name, 0, -1)).sort();
    else if (type === 'list') contents = await admin.lRange(name, 0, -1);
    else if (type === 'string') contents = await admin.get(name);
    else contents = type;
    entries.push(`${type} ${name} ${JSON.stringify(contents)}`);
  }
  return entries;
}

function released(lease: Lease): Got {
  return { give: () => lease.release() };
}

/** Applies to every kind with a lease and an owner. */
const LEASED: Applies = {
  outage: true,
  wakeUp: true,
  lossAfterFreeze: true,
  abort: true,
  waitMs: true,
  idempotentRetries: true,
  scriptFlush: true,
  connectionKill: true,
  telemetry: true,
  cli: true,
};

function cliOf(kind: Kind): true | string {
  return kind.cli ? true : 'the operator CLI does not read this layout';
}

/** Holds `kind` on the holder's client (a watchdog lease, or a fixed one for expiry). */
async function held(kind: Kind, scene: Scene, leaseMs?: number): Promise<Lease> {
  const options = leaseMs === undefined ? {} : { leaseMs };
  return kind.handle(scene.holder, scene.name).acquire(options);
}

/** The events that free an exclusive lock: release, lease expiry, an operator's forceUnlock. */
function lockFrees(kind: Kind): [FreeEvent, ...FreeEvent[]] {
  return [
    {
      event: 'release',
      wakes: 'message',
      block: async (scene) => {
        const lease = await held(kind, scene);
        return { free: () => lease.release() };
      },
    },
    {
      event: 'lease expiry',
      wakes: 'expiry',
      block: async (scene) => {
        await held(kind, scene, EXPIRY_MS);
        return { free: async () => {} };
      },
    },
    {
      event: 'forceUnlock',
      wakes: 'message',
      block: async (scene) => {
        await held(kind, scene);
        return {
          free: async () => {
            await kind.handle(scene.other, scene.name).forceUnlock();
          },
        };
      },
    },
  ];
}

/** A hold of a lock kind: acquire, and a hold count that the acquire raises by one. */
function holdWait(kind: Kind): Pick<Waitable, 'available' | 'wait' | 'timesOut' | 'once'> {
  return {
    available: async () => {},
    wait: async (locks, name, options) => released(await kind.handle(locks, name).acquire(options)),
    timesOut: 'LockTimeoutError',
    once: {
      what: 'an acquire of a free lock',
      ready: async () => {},
      call: (locks, name) => kind.handle(locks, name).acquire(),
      level: async (admin, key) => {
        const snapshot = await kind.inspect(admin, key);
        return kind.keyType === 'hash' ? snapshot.counts.reduce((a, b) => a + b, 0) : snapshot.owners;
      },
      step: 1,
    },
  };
}

function lockWaitable(kind: Kind, polls?: string): Waitable {
  return {
    name: kind.name,
    ...(polls === undefined ? {} : { polls }),
    kind,
    applies: { ...LEASED, cli: cliOf(kind) },
    channel: (key) => kind.channel(key),
    frees: lockFrees(kind),
    ...holdWait(kind),
  };
}

/** A writer of the read-write lock `scene.name`, on `locks`. */
function writer(locks: LockClient, name: string): WriteLock {
  return locks.readWriteLock(name).writeLock();
}

/** Readers wait for a writer: its release, its lease running out, forceUnlock, a waiting writer giving up. */
const READ: Waitable = {
  name: 'readLock',
  kind: READ_LOCK,
  applies: { ...LEASED, cli: cliOf(READ_LOCK) },
  channel: (key) => READ_LOCK.channel(key),
  frees: [
    {
      event: 'the writer leaving',
      wakes: 'message',
      block: async (scene) => {
        const lease = await writer(scene.holder, scene.name).acquire();
        return { free: () => lease.release() };
      },
    },
    {
      event: "the writer's lease expiry",
      wakes: 'expiry',
      block: async (scene) => {
        await writer(scene.holder, scene.name).acquire({ leaseMs: EXPIRY_MS });
        return { free: async () => {} };
      },
    },
    {
      event: 'forceUnlock',
      wakes: 'message',
      block: async (scene) => {
        await writer(scene.holder, scene.name).acquire();
        return {
          free: async () => {
            await scene.other.readWriteLock(scene.name).forceUnlock();
          },
        };
      },
    },
    {
      // Writer preference: a new reader waits while a writer waits, until that writer gives up.
      event: 'a waiting writer giving up',
      wakes: 'message',
      block: async (scene) => {
        await READ_LOCK.handle(scene.holder, scene.name).acquire();
        const giveUp = new AbortController();
        const waiting = writer(scene.other, scene.name).acquire({ signal: giveUp.signal });
        waiting.catch(() => undefined);
        // The writer is recorded as waiting before the test's reader comes.
        const writers = `latchkey_writers:{${scene.key}}`;
        for (let tries = 0; Number(await scene.admin.zCard(writers)) === 0; tries += 1) {
          if (tries > 500) throw new Error('the writer never started waiting');
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
        return {
          free: async () => {
            giveUp.abort(new Error('the writer gives up'));
            await waiting.catch(() => undefined);
          },
        };
      },
    },
  ],
  ...holdWait(READ_LOCK),
};

/** A writer waits for a writer, and for readers: the last reader leaving frees it. */
const WRITE: Waitable = {
  name: 'writeLock',
  kind: WRITE_LOCK,
  applies: { ...LEASED, cli: cliOf(WRITE_LOCK) },
  channel: (key) => WRITE_LOCK.channel(key),
  frees: [
    ...lockFrees(WRITE_LOCK),
    {
      event: 'the last reader leaving',
      wakes: 'message',
      block: async (scene) => {
        const first = await READ_LOCK.handle(scene.holder, scene.name).acquire();
        const second = await READ_LOCK.handle(scene.other, scene.name).acquire();
        return {
          free: async () => {
            await first.release();
            await second.release();
          },
        };
      },
    },
    {
      event: "the last reader's lease expiry",
      wakes: 'expiry',
      block: async (scene) => {
        await READ_LOCK.handle(scene.holder, scene.name).acquire({ leaseMs: EXPIRY_MS });
        return { free: async () => {} };
      },
    },
  ],
  ...holdWait(WRITE_LOCK),
};

/** The permit semaphore `name` as the waiter sees it: no `permits`, so a missing counter holds none. */
function permits(locks: LockClient, name: string, count?: number): PermitSemaphore {
  return count === undefined ? locks.permitSemaphore(name) : locks.permitSemaphore(name, { permits: count });
}

/** One permit, taken: by its lease's release or by id, its lease running out, forceUnlock, more permits, a counter created. */
const PERMITS: Waitable = {
  name: 'permitSemaphore',
  kind: PERMIT_SEMAPHORE,
  applies: { ...LEASED, cli: cliOf(PERMIT_SEMAPHORE) },
  channel: (key) => PERMIT_SEMAPHORE.channel(key),
  frees: [
    {
      event: 'release of the lease',
      wakes: 'message',
      block: async (scene) => {
        const lease = await permits(scene.holder, scene.name, 1).acquire();
        return { free: () => lease.release() };
      },
    },
    {
      event: 'release by permit id from another client',
      wakes: 'message',
      block: async (scene) => {
        const lease = await permits(scene.holder, scene.name, 1).acquire();
        return {
          free: async () => {
            if (!(await permits(scene.other, scene.name).release(lease.permitId))) {
              throw new Error('the permit was not out');
            }
          },
        };
      },
    },
    {
      event: "the permit's lease lapsing",
      wakes: 'expiry',
      block: async (scene) => {
        await permits(scene.holder, scene.name, 1).acquire({ leaseMs: EXPIRY_MS });
        return { free: async () => {} };
      },
    },
    {
      event: 'forceUnlock',
      wakes: 'message',
      block: async (scene) => {
        await permits(scene.holder, scene.name, 1).acquire();
        return {
          free: async () => {
            await permits(scene.other, scene.name).forceUnlock();
          },
        };
      },
    },
    {
      event: 'addPermits',
      wakes: 'message',
      block: async (scene) => {
        await permits(scene.holder, scene.name, 1).acquire();
        return {
          free: async () => {
            await permits(scene.other, scene.name).addPermits(1);
          },
        };
      },
    },
    {
      event: 'trySetPermits on a missing counter',
      wakes: 'message',
      block: (scene) =>
        Promise.resolve({
          free: async () => {
            if (!(await permits(scene.other, scene.name).trySetPermits(1))) {
              throw new Error('the counter existed already');
            }
          },
        }),
    },
    {
      event: 'the counter created by another client',
      wakes: 'message',
      block: (scene) =>
        Promise.resolve({
          free: async () => {
            await permits(scene.other, scene.name, 1).availablePermits();
          },
        }),
    },
  ],
  available: async (scene) => {
    await permits(scene.other, scene.name).trySetPermits(1);
  },
  wait: async (locks, name, options) => released(await permits(locks, name).acquire(options)),
  timesOut: 'LockTimeoutError',
  once: {
    what: 'an acquire of a free permit',
    ready: async (scene) => {
      await permits(scene.other, scene.name).trySetPermits(3);
    },
    call: (locks, name) => permits(locks, name).acquire(),
    level: async (admin, key) => Number(await admin.zCard(`{${key}}:timeout`)),
    step: 1,
  },
};

/** The plain semaphore `name`: no `permits`, so a missing counter holds none. */
function semaphore(locks: LockClient, name: string): Semaphore {
  return locks.semaphore(name);
}

const NO_OWNER = 'no lease: a permit of a Semaphore is not owned, and nothing renews or loses it';

/** Every permit taken: a release, more permits, a counter set or created. */
const SEMAPHORE: Waitable = {
  name: 'semaphore',
  kind: undefined,
  applies: {
    ...LEASED,
    lossAfterFreeze: NO_OWNER,
  },
  channel: (key) => `redisson_sc:{${key}}`,
  frees: [
    {
      event: 'release',
      wakes: 'message',
      block: async (scene) => {
        const taken = semaphore(scene.holder, scene.name);
        await taken.trySetPermits(1);
        await taken.acquire();
        return { free: () => taken.release() };
      },
    },
    {
      event: 'addPermits',
      wakes: 'message',
      block: async (scene) => {
        await semaphore(scene.holder, scene.name).trySetPermits(0);
        return {
          free: async () => {
            await semaphore(scene.other, scene.name).addPermits(1);
          },
        };
      },
    },
    {
      event: 'trySetPermits on a missing counter',
      wakes: 'message',
      block: (scene) =>
        Promise.resolve({
          free: async () => {
            if (!(await semaphore(scene.other, scene.name).trySetPermits(1))) {
              throw new Error('the counter existed already');
            }
          },
        }),
    },
    {
      event: 'the counter created by another client',
      wakes: 'message',
      block: (scene) =>
        Promise.resolve({
          free: async () => {
            await scene.other.semaphore(scene.name, { permits: 1 }).availablePermits();
          },
        }),
    },
  ],
  available: async (scene) => {
    await semaphore(scene.other, scene.name).trySetPermits(1);
  },
  wait: async (locks, name, options) => {
    const handle = semaphore(locks, name);
    await handle.acquire(options);
    return { give: () => handle.release() };
  },
  timesOut: 'LockTimeoutError',
  once: {
    what: 'an acquire of a free permit',
    ready: async (scene) => {
      await semaphore(scene.other, scene.name).trySetPermits(3);
    },
    call: (locks, name) => semaphore(locks, name).acquire(),
    level: async (admin, key) => -Number((await admin.get(key)) ?? 0),
    step: 1,
  },
};

/** The latch: counted down to zero, deleted, or run out of its TTL. */
const LATCH: Waitable = {
  name: 'countDownLatch',
  kind: undefined,
  applies: {
    ...LEASED,
    lossAfterFreeze: 'nothing is held: an await takes nothing that could be lost',
  },
  channel: (key) => `redisson_countdownlatch__channel__{${key}}`,
  frees: [
    {
      event: 'countDown to zero',
      wakes: 'message',
      block: async (scene) => {
        const latch = scene.holder.countDownLatch(scene.name);
        await latch.trySetCount(2);
        await latch.countDown();
        return {
          free: async () => {
            await scene.other.countDownLatch(scene.name).countDown();
          },
        };
      },
    },
    {
      event: 'delete',
      wakes: 'message',
      block: async (scene) => {
        await scene.holder.countDownLatch(scene.name).trySetCount(1);
        return {
          free: async () => {
            await scene.other.countDownLatch(scene.name).delete();
          },
        };
      },
    },
    {
      event: "the latch's TTL running out",
      wakes: 'expiry',
      block: async (scene) => {
        await scene.holder.countDownLatch(scene.name).trySetCount(1, { ttlMs: EXPIRY_MS });
        return { free: async () => {} };
      },
    },
  ],
  available: async () => {},
  wait: async (locks, name, options) => {
    if (!(await locks.countDownLatch(name).await(options))) throw new LatchClosed();
    return { give: async () => {} };
  },
  timesOut: 'false',
  once: {
    what: 'a countDown',
    ready: async (scene) => {
      await scene.other.countDownLatch(scene.name).trySetCount(3);
    },
    call: (locks, name) => locks.countDownLatch(name).countDown(),
    level: async (admin, key) => Number((await admin.get(key)) ?? 0),
    step: -1,
  },
};

/** A latch's await that answered `false`: its `waitMs` ran out before the count reached zero. */
export class LatchClosed extends Error {
  constructor() {
    super('the latch did not open within waitMs (await answered false)');
    this.name = 'LatchClosed';
  }
}

/** Every kind, each half of a read-write lock a row of its own. */
export const EVERY_KIND: readonly Waitable[] = [
  lockWaitable(LOCK),
  lockWaitable(FENCED_LOCK),
  lockWaitable(
    SIMPLE_LOCK,
    'other clients of its layout (redis-py, node-redlock) announce no release, so its first waiter re-checks at growing intervals up to 250 ms',
  ),
  lockWaitable(FAIR_LOCK),
  READ,
  WRITE,
  SEMAPHORE,
  PERMITS,
  LATCH,
];

/** The kinds to which `behaviour` applies. */
export function kindsWhere(behaviour: Behaviour): readonly Waitable[] {
  return EVERY_KIND.filter((waitable) => waitable.applies[behaviour] === true);
}
