/**
 * Waiters woken by unlock messages instead of polling.
 *
 * Five settlement workers all want the ledger lock of one merchant at the same time. One
 * settles its batch of payments while the others wait; each release publishes an unlock
 * message that hands the lock to the next worker. The example prints, for every handoff, the
 * time from one worker's release to the next worker's acquisition.
 *
 * The lock's lease is the default 30 s. A waiter that missed the message would sleep until
 * that lease ran out, so handoffs of a few milliseconds show the message did the waking.
 *
 * Run it against a Redis of your own:
 *   REDIS_URL=redis://127.0.0.1:6379 npx tsx examples/waiters-pubsub.ts
 * or with a throwaway redis-server:
 *   npm run example -- waiters-pubsub
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient } from 'redis';
import { LockClient } from 'latchkey';

const url = process.env['REDIS_URL'] || 'redis://127.0.0.1:6379';
// Named after what `connect()` resolves: `ReturnType<typeof createClient>` is a client of the
// default options, and node-redis 6 (RESP3 by default) does not take this one for it.
const connect = () => createClient({ url }).connect();
type Redis = Awaited<ReturnType<typeof connect>>;
// A prefix of its own, so the example never touches keys it did not create.
const keyPrefix = `examples:${randomBytes(4).toString('hex')}:`;

const WORKERS = 5;
const SETTLE_MS = 150;
const LOCK_NAME = 'ledger:merchant-1042';
/** Far above any real handoff, far below the 30 s a missed unlock message would cost. */
const MAX_HANDOFF_MS = 1_000;

function ensure(condition: boolean, message: string): asserts condition {
  if (!condition) throw new Error(`Expectation failed: ${message}`);
}

function ms(value: number, digits = 0): string {
  return `${value.toFixed(digits)} ms`;
}

function row(turn: string, worker: string, at: string, waited: string, handoff: string): void {
  console.log(
    `  ${turn.padStart(4)}  ${worker.padEnd(10)}  ${at.padStart(8)}  ${waited.padStart(8)}  ${handoff.padStart(9)}`,
  );
}

interface Worker {
  readonly name: string;
  readonly redis: Redis;
  readonly locks: LockClient;
}

const redis = await connect();
// One connection and one LockClient per worker, as if each ran in a process of its own:
// every one of them subscribes to the unlock channel and is woken by the message.
const workers: Worker[] = await Promise.all(
  Array.from({ length: WORKERS }, async (_, index): Promise<Worker> => {
    const connection = await redis.duplicate().connect();
    return {
      name: `settler-${index + 1}`,
      redis: connection,
      locks: new LockClient(connection, { keyPrefix }),
    };
  }),
);

const startedAt = performance.now();
let releasedAt: number | undefined;
let holders = 0;
let turn = 0;
const handoffs: number[] = [];

async function settlePayments(worker: Worker): Promise<void> {
  const askedAt = performance.now();
  const lease = await worker.locks.lock(LOCK_NAME).acquire({ waitMs: 15_000 });
  const acquiredAt = performance.now();
  holders += 1;
  turn += 1;
  try {
    ensure(holders === 1, `${worker.name} got the ledger while another worker held it`);
    const handoff = releasedAt === undefined ? undefined : acquiredAt - releasedAt;
    if (handoff !== undefined) handoffs.push(handoff);
    row(
      String(turn),
      worker.name,
      ms(acquiredAt - startedAt),
      ms(acquiredAt - askedAt),
      handoff === undefined ? 'first' : ms(handoff, 1),
    );
    // Stands in for settling this worker's batch of payments against the ledger.
    await sleep(SETTLE_MS);
  } finally {
    holders -= 1;
    // Taken before release() is sent: the handoff includes the whole release round trip.
    releasedAt = performance.now();
    await lease.release();
  }
}

try {
  console.log(`${WORKERS} workers want ${LOCK_NAME}; each holds it ${SETTLE_MS} ms`);
  row('turn', 'worker', 'at', 'waited', 'handoff');
  await Promise.all(workers.map((worker) => settlePayments(worker)));

  const sorted = [...handoffs].sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)] ?? 0;
  const max = sorted[sorted.length - 1] ?? 0;
  console.log(`  ${handoffs.length} handoffs: median ${ms(median, 1)}, max ${ms(max, 1)} (lease 30000 ms)`);
  ensure(handoffs.length === WORKERS - 1, 'every worker after the first should have been handed the lock');
  ensure(max < MAX_HANDOFF_MS, `a handoff took ${ms(max)}: the unlock message did not wake the waiter`);
  console.log('Every waiter was woken by the unlock message, one at a time.');
} finally {
  await Promise.all(workers.map((worker) => worker.locks.close()));
  await Promise.all([redis.close(), ...workers.map((worker) => worker.redis.close())]);
}
