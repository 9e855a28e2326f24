/**
 * Payment settlements processed strictly in the order they arrived, by several workers.
 *
 * A merchant's payments must settle against its ledger in arrival order (a refund must never
 * settle before the payment it refunds). Three settlement workers, each with a connection and a
 * LockClient of its own as if each ran in a process of its own, take payments as they arrive and
 * settle each under the merchant's FAIR lock. The ledger is closed for end-of-day checks while
 * the payments come in, so all of them queue; once it reopens they are served one at a time, in
 * the order they queued, whichever worker holds each.
 *
 * The line is Redisson's: a Redis list `redisson_lock_queue:{<key>}` of waiting owners, so a Java
 * service on Redisson's RFairLock would wait in the same line. Each release wakes only the owner
 * next in line, on its own channel.
 *
 * Run it against a Redis of your own:
 *   REDIS_URL=redis://127.0.0.1:6379 npx tsx examples/ordered-settlement.ts
 * or with a throwaway redis-server:
 *   npm run example -- ordered-settlement
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient } from 'redis';
import { LockClient, type FairLock } from 'latchkey';

const url = process.env['REDIS_URL'] || 'redis://127.0.0.1:6379';
// Named after what `connect()` resolves: `ReturnType<typeof createClient>` is a client of the
// default options, and node-redis 6 (RESP3 by default) does not take this one for it.
const connect = () => createClient({ url }).connect();
type Redis = Awaited<ReturnType<typeof connect>>;
// A prefix of its own, so the example never touches keys it did not create.
const keyPrefix = `examples:${randomBytes(4).toString('hex')}:`;

const LOCK_NAME = 'ledger:merchant-2291';
const SETTLE_MS = 60;
const PAYMENTS = [
  { id: 'pay-001', kind: 'payment', amount: 120_00 },
  { id: 'pay-002', kind: 'payment', amount: 35_50 },
  { id: 'ref-001', kind: 'refund of pay-001', amount: -120_00 },
  { id: 'pay-003', kind: 'payment', amount: 9_99 },
  { id: 'ref-002', kind: 'refund of pay-003', amount: -9_99 },
  { id: 'pay-004', kind: 'payment', amount: 250_00 },
] as const;

function ensure(condition: boolean, message: string): asserts condition {
  if (!condition) throw new Error(`Expectation failed: ${message}`);
}

function euros(cents: number): string {
  return `${cents < 0 ? '-' : ''}${(Math.abs(cents) / 100).toFixed(2)} EUR`.padStart(12);
}

interface SettlementWorker {
  readonly name: string;
  readonly redis: Redis;
  readonly locks: LockClient;
  readonly ledger: FairLock;
}

const redis = await connect();
const workers: SettlementWorker[] = await Promise.all(
  ['settler-a', 'settler-b', 'settler-c'].map(async (name): Promise<SettlementWorker> => {
    const connection = await redis.duplicate().connect();
    const locks = new LockClient(connection, { keyPrefix });
    return { name, redis: connection, locks, ledger: locks.fairLock(LOCK_NAME) };
  }),
);
const [first] = workers;
if (first === undefined) throw new Error('no workers');
const queueKey = `redisson_lock_queue:{${first.ledger.key}}`;

const settled: string[] = [];
let balance = 0;
let settling = 0;

async function settle(worker: SettlementWorker, payment: (typeof PAYMENTS)[number]): Promise<void> {
  await worker.ledger.withLock(async () => {
    settling += 1;
    try {
      ensure(settling === 1, `${payment.id} settled while another settlement ran`);
      // Stands in for posting the payment to the merchant's ledger.
      await sleep(SETTLE_MS);
      balance += payment.amount;
      settled.push(payment.id);
      console.log(
        `  ${String(settled.length).padStart(2)}. ${payment.id}  ${payment.kind.padEnd(18)} ${euros(payment.amount)}  by ${worker.name}  balance ${euros(balance)}`,
      );
    } finally {
      settling -= 1;
    }
  });
}

try {
  // End-of-day checks hold the ledger while the payments arrive.
  const checks = await first.ledger.acquire();
  console.log(`The ledger of ${LOCK_NAME} is closed for checks; payments arrive and queue:`);
  const settlements: Promise<void>[] = [];
  for (const [index, payment] of PAYMENTS.entries()) {
    // Round robin over the workers: neighbours in the line belong to different workers.
    const worker = workers[index % workers.length];
    if (worker === undefined) throw new Error('no worker');
    settlements.push(settle(worker, payment));
    // The next payment arrives once this one is in the line, so the arrival order is known.
    while ((await redis.lLen(queueKey)) < index + 1) await sleep(5);
    console.log(`  ${payment.id} arrived at ${worker.name}; in line: ${index + 1}`);
  }
  console.log('Checks done, the ledger reopens. Settled in this order:');
  await checks.release();
  await Promise.all(settlements);

  const arrived = PAYMENTS.map((payment) => payment.id);
  ensure(
    settled.join() === arrived.join(),
    `settled ${settled.join()} but they arrived as ${arrived.join()}`,
  );
  ensure((await redis.exists(queueKey)) === 0, 'the line should be empty');
  console.log('Every payment settled in arrival order; every refund after its payment.');
} finally {
  await Promise.all(workers.map((worker) => worker.locks.close()));
  await Promise.all([redis.close(), ...workers.map((worker) => worker.redis.close())]);
}
