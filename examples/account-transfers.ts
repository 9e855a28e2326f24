/**
 * A multi-lock: money moved between accounts, each transfer holding both of its accounts at once.
 *
 * Four tellers (each with a connection and a LockClient of its own, as separate processes would
 * have) make transfers between five accounts at random, read-modify-write on each balance with a
 * pause in between, as a real service calling a ledger would. Each transfer takes
 * `multiLock([from, to])` — listed in its own order, so two tellers often ask for the same two
 * accounts in opposite orders, the classic recipe for a deadlock. The example checks:
 *   - every transfer completes (no two tellers ever wait for each other);
 *   - the money is all there at the end (no balance update is lost);
 *   - while a transfer holds its two accounts, nobody else touches either.
 *
 * Run it against a Redis of your own:
 *   REDIS_URL=redis://127.0.0.1:6379 npx tsx examples/account-transfers.ts
 * or with a throwaway redis-server:
 *   npm run example -- account-transfers
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient } from 'redis';
import { LockClient } from 'latchkey';

const url = process.env['REDIS_URL'] || 'redis://127.0.0.1:6379';
// A prefix of its own, so the example never touches keys it did not create.
const keyPrefix = `examples:${randomBytes(4).toString('hex')}:`;
const BALANCES_KEY = `${keyPrefix}balances`;

const TELLERS = 4;
const TRANSFERS_PER_TELLER = 12;
const ACCOUNTS = ['acc-1001', 'acc-1002', 'acc-1003', 'acc-1004', 'acc-1005'];
const OPENING_BALANCE = 1_000;

function ensure(condition: boolean, message: string): asserts condition {
  if (!condition) throw new Error(`Expectation failed: ${message}`);
}

function pick<T>(items: readonly T[]): T {
  return items[Math.floor(Math.random() * items.length)] as T;
}

const redis = await createClient({ url }).connect();
const connections = [redis];
const tellers = await Promise.all(
  Array.from({ length: TELLERS }, async () => {
    const connection = await redis.duplicate().connect();
    connections.push(connection);
    return new LockClient(connection, { keyPrefix });
  }),
);

/** Accounts some transfer holds right now: two transfers must never share one. */
const inUse = new Set<string>();
let overlaps = 0;

async function transfer(locks: LockClient, from: string, to: string, amount: number): Promise<void> {
  const accounts = locks.multiLock([locks.lock(`account:${from}`), locks.lock(`account:${to}`)]);
  await accounts.withLock(async () => {
    if (inUse.has(from) || inUse.has(to)) overlaps += 1;
    inUse.add(from).add(to);
    try {
      const debited = Number(await redis.hGet(BALANCES_KEY, from)) - amount;
      const credited = Number(await redis.hGet(BALANCES_KEY, to)) + amount;
      await sleep(5);
      await redis.hSet(BALANCES_KEY, { [from]: debited, [to]: credited });
    } finally {
      inUse.delete(from);
      inUse.delete(to);
    }
  });
}

async function teller(locks: LockClient): Promise<number> {
  let done = 0;
  for (let i = 0; i < TRANSFERS_PER_TELLER; i += 1) {
    const from = pick(ACCOUNTS);
    const to = pick(ACCOUNTS.filter((account) => account !== from));
    await transfer(locks, from, to, 1 + Math.floor(Math.random() * 50));
    done += 1;
  }
  return done;
}

try {
  await redis.hSet(BALANCES_KEY, Object.fromEntries(ACCOUNTS.map((account) => [account, OPENING_BALANCE])));
  const startedAt = performance.now();
  const done = await Promise.all(tellers.map((locks) => teller(locks)));
  const took = performance.now() - startedAt;
  const balances = await redis.hGetAll(BALANCES_KEY);
  const total = Object.values(balances).reduce((sum, balance) => sum + Number(balance), 0);

  console.log(
    `${TELLERS} tellers made ${done.reduce((a, b) => a + b, 0)} transfers in ${took.toFixed(0)} ms`,
  );
  console.log(`balances: ${ACCOUNTS.map((account) => `${account} ${balances[account]}`).join(', ')}`);
  console.log(`total: ${total} (opened with ${ACCOUNTS.length * OPENING_BALANCE})`);
  ensure(
    done.every((count) => count === TRANSFERS_PER_TELLER),
    'every transfer completed, whatever order it listed its accounts in',
  );
  ensure(total === ACCOUNTS.length * OPENING_BALANCE, 'no balance update was lost');
  ensure(overlaps === 0, 'no two transfers ever held the same account at once');
  console.log('Every transfer went through, one account at a time, and not a cent went missing.');
} finally {
  await Promise.all(tellers.map((locks) => locks.close()));
  await redis.del(BALANCES_KEY);
  await Promise.all(connections.map((connection) => connection.quit()));
}
