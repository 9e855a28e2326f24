/**
 * Fencing tokens: a store that refuses the late write of a holder whose lock expired.
 *
 * Two instances of the stock service update the on-hand count of SKU-1042, each under the
 * fenced lock `inventory:SKU-1042:writer`. Every acquisition of a fenced lock carries a token
 * that grows with each acquisition, and every write to the record carries the writer's token;
 * a small Lua script writes only when that token is not older than the newest one the record
 * has seen, and remembers it.
 *
 * The till (A) takes the lock with a 500 ms lease, reads 40 units, records a sale of 3, and
 * then stalls before writing 37 (a long GC pause, a stalled await), past its lease. Goods
 * receiving (B) takes the lock meanwhile, with a larger token, and writes 40 + 24 = 64. When
 * A wakes up, it sends its write as if nothing happened: no check it made before the stall
 * can help, since the stall came after it. The record refuses it, because it has already
 * seen B's larger token. Without the token, A's 37 would overwrite 64 and lose the delivery.
 *
 * It exits non-zero unless the stale write was refused and B's value stands.
 *
 * Run it against a Redis of your own:
 *   REDIS_URL=redis://127.0.0.1:6379 npx tsx examples/fenced-writes.ts
 * or with a throwaway redis-server:
 *   npm run example -- fenced-writes
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient } from 'redis';
import { LockClient, LockNotOwnedError } from 'latchkey';

const url = process.env['REDIS_URL'] || 'redis://127.0.0.1:6379';
// Named after what `connect()` resolves: `ReturnType<typeof createClient>` is a client of the
// default options, and node-redis 6 (RESP3 by default) does not take this one for it.
const connect = () => createClient({ url }).connect();
type Redis = Awaited<ReturnType<typeof connect>>;
// A prefix of its own, so the example never touches keys it did not create (EXAMPLE_KEY_PREFIX
// picks it instead, for a test that must know it).
const keyPrefix = process.env['EXAMPLE_KEY_PREFIX'] || `examples:${randomBytes(4).toString('hex')}:`;

const LEASE_MS = 500;
/** How long A stalls: well past its lease. */
const STALL_MS = 2 * LEASE_MS;
const SKU = 'SKU-1042';
const LOCK_NAME = `inventory:${SKU}:writer`;
const RECORD_KEY = `${keyPrefix}inventory:${SKU}`;
const START_UNITS = 40;
const SOLD_BY_A = 3;
const RECEIVED_BY_B = 24;

/**
 * The fenced write. The record is a hash: `value`, and `token`, the largest token that has
 * written it.
 *
 * A write passes when its token is >= the record's, not only when it is strictly greater.
 * Each acquisition gets a token of its own (a re-entry too), so two acquisitions never share
 * one: an equal token can only come from the acquisition that wrote last, writing again (a
 * second step of the same job, or a retry after a timeout hid whether the first write
 * landed). Refusing that would stop a legitimate holder and keep nobody out. A stale holder
 * has a smaller token than whoever came after it, and is refused as soon as that later holder
 * has written. (Until then nothing can tell it is stale; that is how far fencing reaches.)
 * Since a re-entry gets a larger token, nested code that writes with its own lease moves the
 * record past the outer lease's token, and the outer lease's writes after that are refused:
 * write a record from one level only, or hand the newest token back up.
 *
 * Tokens are compared as decimal strings, by length and then digit by digit: Lua numbers are
 * doubles, exact only up to 2^53, and tokens are 64-bit.
 *
 * KEYS[1] the record; ARGV[1] the writer's token; ARGV[2] the new value.
 * Returns {1, token} when written, {0, the record's token} when refused.
 */
const FENCED_WRITE = `
local seen = redis.call('HGET', KEYS[1], 'token')
local token = ARGV[1]
if seen and (#token < #seen or (#token == #seen and token < seen)) then
  return {0, seen}
end
redis.call('HSET', KEYS[1], 'value', ARGV[2], 'token', token)
return {1, token}
`;

interface WriteOutcome {
  readonly written: boolean;
  /** The writer's token when written; the record's newer token when refused. */
  readonly token: bigint;
}

async function fencedWrite(redis: Redis, token: bigint, units: number): Promise<WriteOutcome> {
  const reply = (await redis.eval(FENCED_WRITE, {
    keys: [RECORD_KEY],
    arguments: [token.toString(), String(units)],
  })) as [number, string];
  return { written: reply[0] === 1, token: BigInt(reply[1]) };
}

async function readUnits(redis: Redis): Promise<number> {
  return Number(await redis.hGet(RECORD_KEY, 'value'));
}

function deferred(): { readonly promise: Promise<void>; readonly resolve: () => void } {
  let resolve: () => void = () => {};
  const promise = new Promise<void>((done) => {
    resolve = done;
  });
  return { promise, resolve };
}

function ensure(condition: boolean, message: string): asserts condition {
  if (!condition) throw new Error(`Expectation failed: ${message}`);
}

function row(who: string, what: string, detail = ''): void {
  console.log(`  ${who.padEnd(14)} ${what.padEnd(24)} ${detail}`.trimEnd());
}

const tillRedis = await connect();
const receivingRedis = await tillRedis.duplicate().connect();
// Two LockClients on connections of their own: two instances of the stock service.
const till = new LockClient(tillRedis, { keyPrefix });
const receiving = new LockClient(receivingRedis, { keyPrefix });
// Where the fenced lock keeps its token counter (as Redisson's RFencedLock does), to delete it.
const tokenCounterKey = `redisson_lock_token:{${keyPrefix}${LOCK_NAME}}`;

/** A: reads, decides, stalls past its lease, then writes as if it still held the lock. */
async function tillSale(tookLock: () => void, stall: () => Promise<void>): Promise<WriteOutcome> {
  const lease = await till.fencedLock(LOCK_NAME).acquire({ leaseMs: LEASE_MS });
  row('A (till)', 'took the lock', `token ${lease.token}, lease ${LEASE_MS} ms`);
  tookLock();
  const units = (await readUnits(tillRedis)) - SOLD_BY_A;
  // Without fencing, the best A can do is check that it still holds the lock just before the
  // write. It does; the stall comes after the check, as it can anywhere in real code.
  lease.signal.throwIfAborted();
  row('A (till)', `read ${units + SOLD_BY_A} units`, `sold ${SOLD_BY_A}, will write ${units}; stalls...`);

  const stalledAt = performance.now();
  await stall();
  const stalledMs = Math.round(performance.now() - stalledAt);

  const lost = lease.signal.aborted ? ', lease.signal aborted meanwhile' : '';
  row('A (till)', 'woke up', `after ${stalledMs} ms${lost}; writes ${units} with token ${lease.token}`);
  const outcome = await fencedWrite(tillRedis, lease.token, units);
  if (outcome.written) {
    row('A (till)', 'write ACCEPTED', `the record took ${units} from a holder whose lease had run out`);
  } else {
    row('A (till)', 'stale write rejected', `the record has seen token ${outcome.token} > ${lease.token}`);
  }
  try {
    await lease.release();
    row('A (till)', 'release()', 'resolved');
  } catch (error) {
    if (!(error instanceof LockNotOwnedError)) throw error;
    row('A (till)', 'release()', `${error.name}: the lock had expired`);
  }
  return { written: outcome.written, token: lease.token };
}

/** B: takes the lock once A's lease has run out, adds a delivery, and lets go. */
async function receiveGoods(): Promise<WriteOutcome> {
  const lock = receiving.fencedLock(LOCK_NAME);
  const startedAt = performance.now();
  const lease = await lock.acquire({ waitMs: 10 * LEASE_MS, leaseMs: LEASE_MS });
  const waited = Math.round(performance.now() - startedAt);
  try {
    row('B (receiving)', 'took the lock', `token ${lease.token}, after waiting ${waited} ms for A's lease`);
    const units = (await readUnits(receivingRedis)) + RECEIVED_BY_B;
    const outcome = await fencedWrite(receivingRedis, lease.token, units);
    row(
      'B (receiving)',
      outcome.written ? `wrote ${units} units` : 'write refused',
      `received ${RECEIVED_BY_B}, token ${lease.token}`,
    );
    return { written: outcome.written, token: lease.token };
  } finally {
    await lease.release();
  }
}

try {
  // Stock from before anyone used the lock: a value, and no token yet.
  await tillRedis.hSet(RECORD_KEY, { value: String(START_UNITS) });
  console.log(`${SKU}: ${START_UNITS} units on hand. A sells ${SOLD_BY_A}, B receives ${RECEIVED_BY_B}.`);

  const aHasLock = deferred();
  const bIsDone = deferred();
  const a = tillSale(aHasLock.resolve, async () => {
    // The stall. The demo also makes it last until B is done, so that the order of events does
    // not depend on how busy the machine is; a real pause waits for nobody.
    await Promise.all([sleep(STALL_MS), bIsDone.promise]);
  });
  await Promise.race([aHasLock.promise, a]);
  const b = receiveGoods().finally(bIsDone.resolve);
  const [byA, byB] = await Promise.all([a, b]);

  const finalUnits = await readUnits(tillRedis);
  const finalToken = BigInt((await tillRedis.hGet(RECORD_KEY, 'token')) ?? '-1');
  console.log(`Record: ${finalUnits} units, written with token ${finalToken}.`);
  ensure(byB.token > byA.token, "B's acquisition came later, so its token must be larger");
  ensure(byB.written, "B's write, made while it held the lock, should be accepted");
  ensure(!byA.written, "A's late write, with a token older than B's, should be rejected");
  ensure(
    finalUnits === START_UNITS + RECEIVED_BY_B,
    `the record should keep B's ${START_UNITS + RECEIVED_BY_B}`,
  );
  ensure(finalToken === byB.token, "the record's token should be B's");
  console.log(`The stale write was rejected and B's value stands: ${finalUnits} units, the delivery kept.`);
} finally {
  // The token counter goes with the record and only with it: reset on its own, it would hand
  // out tokens the record refuses as older than the ones it has seen.
  await tillRedis.del([RECORD_KEY, tokenCounterKey]);
  await Promise.all([till.close(), receiving.close()]);
  await Promise.all([tillRedis.close(), receivingRedis.close()]);
}
