/**
 * The Redlock round and the quorum's lease, without Redis: masters are stand-ins whose grants
 * arrive when the test says. Covers what the servers cannot time exactly: a quorum reached too
 * late for the lease (validity <= 0), grants that arrive after the round was decided, split
 * votes, and loss once fewer than a quorum of the masters' holds remain.
 */
import { EventEmitter } from 'eventemitter3';
import { describe, expect, it } from 'vitest';
import { Events } from '../../src/engine/events.js';
import type { Lease } from '../../src/engine/lease.js';
import type { Target } from '../../src/engine/types.js';
import { LockLostError, type LockClientEvents, type LockLostEvent } from '../../src/index.js';
import type { Lock } from '../../src/primitives/lock/lock.js';
import { driftMs, round, type RoundSettings } from '../../src/redlock/quorum.js';
import { sleep } from '../support/wait.js';

/** A master's lease as the quorum sees it: a signal, a release, and whether it was released. */
class FakeLease {
  readonly controller = new AbortController();
  released = false;
  get signal(): AbortSignal {
    return this.controller.signal;
  }
  release(): Promise<void> {
    this.released = true;
    return Promise.resolve();
  }
  lose(): void {
    this.controller.abort(new LockLostError('lost on this master', 'expired'));
  }
}

/** A master that answers after `delayMs` with a grant (or null: held elsewhere). */
function master(delayMs: number, grants: boolean, leases: FakeLease[]): Lock {
  return {
    tryAcquire: async () => {
      await sleep(delayMs);
      if (!grants) return null;
      const lease = new FakeLease();
      leases.push(lease);
      return lease as unknown as Lease;
    },
  } as unknown as Lock;
}

function settings(
  locks: Lock[],
  ttlMs: number,
  emitter = new EventEmitter<LockClientEvents>(),
): RoundSettings {
  const target = { name: 'payout', key: 'payout', channel: 'ch', protocol: {} } as unknown as Target;
  return {
    locks,
    ready: () => true,
    quorum: Math.floor(locks.length / 2) + 1,
    ttlMs,
    leaseMs: undefined,
    signal: undefined,
    target,
    events: new Events(emitter),
  };
}

describe('Redlock round', () => {
  it('allows for 1% of the lease plus 2 ms of clock drift', () => {
    expect(driftMs(30_000)).toBe(302);
    expect(driftMs(1_000)).toBe(12);
  });

  it('is won by a quorum in time, and decides without waiting for the slowest master', async () => {
    const leases: FakeLease[] = [];
    const startedAt = performance.now();
    const outcome = await round(
      settings([master(5, true, leases), master(5, true, leases), master(300, true, leases)], 10_000),
    );
    expect(outcome.won).toBe(true);
    expect(performance.now() - startedAt).toBeLessThan(200);
    if (!outcome.won) return;
    // The late master's grant joins the lock, and the release reaches it too.
    await sleep(350);
    expect(leases).toHaveLength(3);
    await outcome.lease.release();
    expect(leases.every((lease) => lease.released)).toBe(true);
  });

  it('is lost when the quorum arrives after the validity ran out, and gives every grant back', async () => {
    const leases: FakeLease[] = [];
    // Lease 100 ms, drift 3 ms: a quorum after 120 ms leaves a negative validity.
    const outcome = await round(
      settings([master(120, true, leases), master(120, true, leases), master(120, true, leases)], 100),
    );
    expect(outcome.won).toBe(false);
    if (outcome.won) return;
    expect(outcome.granted).toBeGreaterThanOrEqual(2);
    await sleep(50);
    expect(leases.length).toBe(3);
    expect(leases.every((lease) => lease.released)).toBe(true);
  });

  it('gives back what a split vote took, including grants that arrive after the decision', async () => {
    const leases: FakeLease[] = [];
    const outcome = await round(
      settings(
        [
          master(5, true, leases),
          master(5, false, leases),
          master(5, false, leases),
          master(5, false, leases),
          master(200, true, leases),
        ],
        10_000,
      ),
    );
    // Four answers, one grant: a quorum of 3 is out of reach, so the round is decided without
    // the slow master, whose grant, arriving later, is given back too.
    expect(outcome.won).toBe(false);
    if (outcome.won) return;
    expect(outcome.answered).toBe(4);
    expect(outcome.failed).toBe(0);
    await sleep(250);
    expect(leases).toHaveLength(2);
    expect(leases.every((lease) => lease.released)).toBe(true);
  });

  it('stays held while a quorum of masters holds it, and is lost when one more master drops out', async () => {
    const leases: FakeLease[] = [];
    const emitter = new EventEmitter<LockClientEvents>();
    const lost: LockLostEvent[] = [];
    emitter.on('lockLost', (event) => lost.push(event));
    const outcome = await round(
      settings(
        [
          master(1, true, leases),
          master(1, true, leases),
          master(1, true, leases),
          master(1, true, leases),
          master(1, true, leases),
        ],
        10_000,
        emitter,
      ),
    );
    expect(outcome.won).toBe(true);
    if (!outcome.won) return;
    await sleep(5);
    const [first, second, third] = leases;
    first?.lose();
    second?.lose();
    expect(outcome.lease.signal.aborted).toBe(false);
    expect(lost).toEqual([]);
    third?.lose();
    expect(outcome.lease.signal.aborted).toBe(true);
    expect(outcome.lease.signal.reason).toBeInstanceOf(LockLostError);
    expect((outcome.lease.signal.reason as LockLostError).reason).toBe('expired');
    expect(lost).toHaveLength(1);
    // The masters that still held it are given back; the lease's release says it was lost.
    expect(leases.slice(3).every((lease) => lease.released)).toBe(true);
    await expect(outcome.lease.release()).rejects.toThrow(/lost/);
  });
});
