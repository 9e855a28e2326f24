/**
 * SCRIPT FLUSH every 100 ms while several clients and owners take, re-enter and release a few
 * contended locks: not one operation fails. Each flush empties the server's script cache, so
 * the calls after it go through the EVALSHA -> NOSCRIPT -> EVAL fallback, renewals included.
 * Run for every kind of lock: a kind that cannot be re-entered (the simple lock) makes its
 * second call inside the lock a one-shot try from another client instead, which must find the
 * lock taken. The fenced lock also checks that every acquisition's token is larger than the
 * one before it on the same lock.
 * The single-flush cases are in test/integration/script-flush.test.ts.
 */
import { describe, expect, it } from 'vitest';
import type { Lease, LockClient, LockLostEvent } from '../../src/index.js';
import { KINDS } from '../support/kinds.js';
import { uniquePrefix } from '../support/keys.js';
import { sleep, within } from '../support/wait.js';
import { ownServer } from './own-server.js';
import { scaled } from './scale.js';

const FLUSH_EVERY_MS = 100;
const OPERATIONS = scaled(1_500, 10_000);
/** A fast machine may finish the operations in a few flushes; keep going until this many. */
const MIN_FLUSHES = scaled(10, 50);
const CLIENTS = 3;
const OWNERS_PER_CLIENT = 3;
const KEYS = 4;
const CALL_BOUND_MS = 20_000;

/** One field of an INFO section line such as `cmdstat_eval:calls=12,usec=...`. */
function infoCount(info: string, line: string, field: string): number {
  const match = new RegExp(`^${line}:.*\\b${field}=(\\d+)`, 'm').exec(info);
  return match?.[1] === undefined ? 0 : Number(match[1]);
}

function randomInt(below: number): number {
  return Math.floor(Math.random() * below);
}

describe.each(KINDS)('SCRIPT FLUSH every 100 ms under load: $name', (kind) => {
  const env = ownServer();
  const { res } = env;
  const second = kind.reentrant ? 're-enter' : 'try from another client';

  it(`acquire/${second}/release: 0 of ${OPERATIONS} operations fail`, async () => {
    const prefix = uniquePrefix('flush-load');
    const clients: LockClient[] = [];
    const lost: LockLostEvent[] = [];
    for (let c = 0; c < CLIENTS; c += 1) {
      const locks = await res.lockClient({ keyPrefix: prefix, watchdogTimeoutMs: 1_000 });
      locks.on('lockLost', (event) => lost.push(event));
      clients.push(locks);
    }
    const [longClient] = clients;
    if (longClient === undefined) throw new Error('no clients');
    await env.admin.sendCommand(['CONFIG', 'RESETSTAT']);

    // Held through the whole run: its watchdog renewals meet flushed caches too.
    const longHeld = await kind.handle(longClient, 'long:held').acquire();

    let flushing = true;
    let flushes = 0;
    let operations = 0;
    let cycles = 0;
    let contended = 0;
    const failures: { what: string; error: unknown }[] = [];
    const violations: string[] = [];
    /** Owners inside each lock right now, across every client: never more than one. */
    const inside = new Map<string, number>();
    /** Fenced lock: the token of the latest acquisition of each lock. */
    const lastToken = new Map<string, bigint>();
    const checkToken = (key: string, lease: Lease, what: string): void => {
      const token = kind.tokenOf(lease);
      if (token === undefined) return;
      const last = lastToken.get(key);
      if (last !== undefined && token <= last) violations.push(`${what} got token ${token} after ${last}`);
      lastToken.set(key, token);
    };

    /** `calls`: how many lock operations `call` stands for (withLock is an acquire and a release). */
    const op = async <T>(what: string, call: Promise<T>, calls = 1): Promise<T | undefined> => {
      try {
        const value = await within(call, CALL_BOUND_MS, what);
        operations += calls;
        return value;
      } catch (error) {
        failures.push({ what, error });
        return undefined;
      }
    };

    const owner = async (locks: LockClient, other: LockClient): Promise<void> => {
      while ((operations < OPERATIONS || flushes < MIN_FLUSHES) && failures.length === 0) {
        const name = `shared:${randomInt(KEYS)}`;
        const lock = kind.handle(locks, name);
        const key = `${prefix}${name}`;
        if ((inside.get(key) ?? 0) > 0) contended += 1;
        // withLock gives the cycle one owner, so the nested acquire of a reentrant kind re-enters.
        await op(
          'withLock (acquire + release)',
          lock.withLock(
            async (outer) => {
              const before = inside.get(key) ?? 0;
              if (before !== 0 && kind.exclusive) {
                violations.push(`${name} entered while ${before} other owner(s) held it`);
              }
              inside.set(key, before + 1);
              try {
                if (outer.holdCount !== 1) violations.push(`outer hold count ${outer.holdCount}`);
                checkToken(key, outer, 'an acquisition');
                if (!kind.reentrant) {
                  // Another client's one-shot try, while this owner holds the lock: refused.
                  const contender = await op(
                    'a try from another client',
                    kind.handle(other, name).tryAcquire(),
                  );
                  if (contender !== undefined && contender !== null) {
                    violations.push(`${name} taken by another client while held`);
                    await contender.release();
                  }
                  if (cycles % 10 === 0) {
                    const state = await kind.inspect(env.admin, key);
                    if (state.type !== kind.keyType || state.owners !== 1) {
                      violations.push(`${name} is ${state.type} with ${state.owners} owner(s) while held`);
                    }
                  }
                  await sleep(randomInt(3));
                  return;
                }
                const inner = await op('re-entering acquire', lock.acquire({ waitMs: 0 }));
                if (inner === undefined) return;
                if (inner.holdCount !== 2) violations.push(`re-entered hold count ${inner.holdCount}`);
                checkToken(key, inner, 'a re-entry');
                // Now and then, what Redis holds: one owner, two holds.
                if (cycles % 10 === 0) {
                  const { counts } = await kind.inspect(env.admin, key);
                  // Readers of a read lock hold side by side: each with at most two holds.
                  const wrong = kind.exclusive
                    ? counts.length !== 1 || counts[0] !== 2
                    : counts.some((count) => count > 2);
                  if (wrong) {
                    violations.push(`${name} holds ${JSON.stringify(counts)} while re-entered`);
                  }
                }
                await sleep(randomInt(3));
                await op('inner release', inner.release());
              } finally {
                inside.set(key, (inside.get(key) ?? 1) - 1);
              }
            },
            { waitMs: CALL_BOUND_MS / 2 },
          ),
          2,
        );
        cycles += 1;
      }
    };

    const flusher = (async (): Promise<void> => {
      while (flushing) {
        await env.admin.sendCommand(['SCRIPT', 'FLUSH']);
        flushes += 1;
        await sleep(FLUSH_EVERY_MS);
      }
    })();

    const startedAt = performance.now();
    const owners: Promise<void>[] = [];
    clients.forEach((locks, c) => {
      const other = clients[(c + 1) % clients.length] ?? locks;
      for (let o = 0; o < OWNERS_PER_CLIENT; o += 1) owners.push(owner(locks, other));
    });
    await Promise.all(owners);
    const elapsedMs = performance.now() - startedAt;
    flushing = false;
    await flusher;

    expect(failures.map(({ what, error }) => `${what}: ${String(error)}`)).toEqual([]);
    expect(violations).toEqual([]);
    expect(operations).toBeGreaterThanOrEqual(OPERATIONS);
    // The run lasted through many flushes, and they did force the EVAL fallback.
    const info = await env.admin.info('commandstats');
    const evals = infoCount(info, 'cmdstat_eval', 'calls');
    const evalshas = infoCount(info, 'cmdstat_evalsha', 'calls');
    const noscript = infoCount(await env.admin.info('errorstats'), 'errorstat_NOSCRIPT', 'count');
    expect(flushes).toBeGreaterThanOrEqual(MIN_FLUSHES);
    expect(evals).toBeGreaterThanOrEqual(flushes / 2);
    expect(noscript).toBeGreaterThanOrEqual(flushes / 2);

    // The long hold was renewed across every flush.
    expect(lost).toEqual([]);
    expect(longHeld.signal.aborted).toBe(false);
    if (kind.keyType === 'hash') {
      expect((await kind.inspect(env.admin, longHeld.key)).counts).toEqual([1]);
    } else {
      const state = await kind.inspect(env.admin, longHeld.key);
      expect(state.type).toBe(kind.keyType);
      expect(state.owners).toBe(1);
      expect(state.pttl).toBeGreaterThan(0);
    }
    await longHeld.release();

    // Nothing is left behind.
    for (let k = 0; k < KEYS; k += 1) {
      expect((await kind.inspect(env.admin, `${prefix}shared:${k}`)).owners).toBe(0);
    }
    expect((await kind.inspect(env.admin, longHeld.key)).owners).toBe(0);
    await sleep(50);
    expect(env.unhandled).toEqual([]);
    console.info(
      `[script-flush-load ${kind.name}] ${operations} operations in ${cycles} cycles over ${Math.round(elapsedMs)} ms ` +
        `(${contended} started on a lock another owner held), ${flushes} flushes, ` +
        `${noscript} NOSCRIPT replies, ${evals} EVAL / ${evalshas} EVALSHA calls, 0 failures`,
    );
  }, 120_000);
});
