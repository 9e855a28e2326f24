/**
 * Nested async functions re-entering the lock they already hold.
 *
 * `checkout` takes the lock `cart:<id>` and calls `applyDiscount`, which takes the same lock
 * because the back office also calls it on its own. Called from inside checkout's `withLock`
 * callback, the second acquisition re-enters (the hold count goes to 2) instead of waiting
 * for checkout to finish, which would never happen. Another instance of the cart service is
 * kept out the whole time, and gets the cart as soon as checkout lets go.
 *
 * Run it against a Redis of your own:
 *   REDIS_URL=redis://127.0.0.1:6379 npx tsx examples/nested-reentrancy.ts
 * or with a throwaway redis-server:
 *   npm run example -- nested-reentrancy
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient } from 'redis';
import { LockClient } from 'latchkey';

const url = process.env['REDIS_URL'] || 'redis://127.0.0.1:6379';
// A prefix of its own, so the example never touches keys it did not create.
const keyPrefix = `examples:${randomBytes(4).toString('hex')}:`;

interface Cart {
  readonly id: number;
  subtotalCents: number;
  discountCents: number;
  status: 'open' | 'paid';
}

// Stands in for the carts table.
const carts = new Map<number, Cart>([
  [7, { id: 7, subtotalCents: 12_900, discountCents: 0, status: 'open' }],
]);

function ensure(condition: boolean, message: string): asserts condition {
  if (!condition) throw new Error(`Expectation failed: ${message}`);
}

function row(who: string, what: string, detail = ''): void {
  console.log(`  ${who.padEnd(15)} ${what.padEnd(26)} ${detail}`.trimEnd());
}

function loadCart(cartId: number): Cart {
  const cart = carts.get(cartId);
  if (cart === undefined) throw new Error(`No cart ${cartId}`);
  return cart;
}

const redis = await createClient({ url }).connect();
const otherRedis = await redis.duplicate().connect();
const locks = new LockClient(redis, { keyPrefix });
// A second LockClient on its own connection plays another instance of the cart service.
const otherInstance = new LockClient(otherRedis, { keyPrefix });

async function applyDiscount(cartId: number, percent: number): Promise<void> {
  const cartLock = locks.lock(`cart:${cartId}`);
  // Taken here too because the back office calls applyDiscount directly; from checkout it
  // re-enters, since everything awaited inside checkout's callback is the same owner.
  await cartLock.withLock(async (lease) => {
    const inRedis = await cartLock.holdCount();
    row(
      'applyDiscount',
      `re-entered cart:${cartId}`,
      `hold count ${lease.holdCount} (Redis says ${inRedis})`,
    );
    ensure(lease.holdCount === 2 && inRedis === 2, 'the nested acquisition should re-enter');

    const startedAt = performance.now();
    const rival = await otherInstance.lock(`cart:${cartId}`).tryAcquire({ waitMs: 300 });
    const waited = Math.round(performance.now() - startedAt);
    row('other instance', 'tryAcquire(waitMs 300)', `null after ${waited} ms: blocked`);
    ensure(rival === null, 'another owner must not get the cart while checkout holds it');

    const cart = loadCart(cartId);
    cart.discountCents = Math.round((cart.subtotalCents * percent) / 100);
  });
}

async function checkout(cartId: number): Promise<number> {
  const cartLock = locks.lock(`cart:${cartId}`);
  return cartLock.withLock(async (lease) => {
    row('checkout', `took cart:${cartId}`, `hold count ${lease.holdCount}`);
    await applyDiscount(cartId, 10);

    const afterDiscount = await cartLock.holdCount();
    row('applyDiscount', 'returned', `hold count ${afterDiscount}: checkout still holds it`);
    ensure(afterDiscount === 1, 'leaving the nested withLock should drop one hold, not the lock');

    // Stands in for charging the card.
    await sleep(50);
    const cart = loadCart(cartId);
    cart.status = 'paid';
    return cart.subtotalCents - cart.discountCents;
  });
}

try {
  console.log('Checkout of cart 7, which applies a discount under the same lock:');
  const chargedCents = await checkout(7);
  const stillLocked = await locks.lock('cart:7').isLocked();
  row('checkout', 'released cart:7', `charged $${(chargedCents / 100).toFixed(2)}, locked: ${stillLocked}`);
  ensure(!stillLocked, 'the lock should be gone once the outermost withLock returns');

  const lease = await otherInstance.lock('cart:7').tryAcquire();
  row('other instance', 'tryAcquire()', lease === null ? 'null' : `acquired, hold count ${lease.holdCount}`);
  ensure(lease !== null, 'the other instance should get the cart once checkout is done');
  await lease.release();
  console.log('Re-entry worked, and no other owner got in while checkout held the cart.');
} finally {
  await Promise.all([locks.close(), otherInstance.close()]);
  await Promise.all([redis.close(), otherRedis.close()]);
}
