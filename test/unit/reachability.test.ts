/**
 * How a client decides that Redis is unreachable, without Redis: failures that say so (timeouts,
 * lost connections, "not now" replies) start an outage at the send of the first unanswered try;
 * it is reported once it has lasted the threshold with no answer since, once per outage, and its
 * end is reported at the next answer. Refusals and latchkey's own errors say nothing of it.
 */
import { EventEmitter } from 'eventemitter3';
import { afterEach, describe, expect, it } from 'vitest';
import { Events } from '../../src/engine/events.js';
import { Reachability } from '../../src/engine/reachability.js';
import { LockError, type LockClientEvents } from '../../src/index.js';
import { CommandTimeoutError } from '../../src/scripts/runner.js';
import { sleep, waitUntil } from '../support/wait.js';

const THRESHOLD_MS = 60;

/** node-redis's class of server error replies, by name, as replies.ts recognises them. */
class ErrorReply extends Error {}

function setUp(report = true, thresholdMs = THRESHOLD_MS) {
  const emitter = new EventEmitter<LockClientEvents>();
  const seen: { readonly event: string; readonly payload: unknown }[] = [];
  emitter.on('redisUnreachable', (payload) => seen.push({ event: 'redisUnreachable', payload }));
  emitter.on('redisReachable', (payload) => seen.push({ event: 'redisReachable', payload }));
  const reach = new Reachability(
    {
      thresholdMs,
      report,
      nameOf: (key) => (key.startsWith('app:') ? key.slice(4) : undefined),
    },
    new Events(emitter),
  );
  return { reach, seen };
}

describe('Reachability', () => {
  const made: Reachability[] = [];
  afterEach(() => {
    for (const reach of made.splice(0)) reach.close();
  });
  function track(reach: Reachability): Reachability {
    made.push(reach);
    return reach;
  }

  it('reports an outage once it has lasted the threshold from the first unanswered send, once, and its end at the next answer', async () => {
    const { reach, seen } = setUp();
    track(reach);
    const sentAt = performance.now();
    reach.failed(new CommandTimeoutError(10, false), sentAt, 'app:invoice:1');
    expect(reach.watching).toBe(true);
    await waitUntil('the report', () => seen.length > 0, 2_000);
    expect(performance.now() - sentAt).toBeGreaterThanOrEqual(THRESHOLD_MS);
    expect(seen[0]).toMatchObject({
      event: 'redisUnreachable',
      payload: { name: 'invoice:1', key: 'app:invoice:1' },
    });
    reach.failed(new Error('Socket closed unexpectedly'), performance.now(), 'app:invoice:2');
    await sleep(2 * THRESHOLD_MS);
    expect(seen).toHaveLength(1);
    reach.answered();
    expect(reach.watching).toBe(false);
    expect(seen[1]?.event).toBe('redisReachable');
    expect((seen[1]?.payload as { downForMs: number }).downForMs).toBeGreaterThanOrEqual(THRESHOLD_MS);
  });

  it('reports a try that went unanswered for the whole threshold at once, naming no lock for a key that is no lock', () => {
    const { reach, seen } = setUp();
    track(reach);
    reach.failed(
      new CommandTimeoutError(THRESHOLD_MS, true),
      performance.now() - THRESHOLD_MS,
      'latchkey_request:{x}',
    );
    expect(seen).toHaveLength(1);
    expect(seen[0]?.payload).not.toHaveProperty('name');
    expect(seen[0]?.payload).not.toHaveProperty('key');
  });

  it('an answer before the threshold ends the outage silently; a try sent before that answer counts from it', () => {
    // A threshold no stall of this process between two statements comes near.
    const { reach, seen } = setUp(true, 60_000);
    track(reach);
    reach.failed(new Error('connect ECONNREFUSED 127.0.0.1:1'));
    reach.answered();
    expect(reach.watching).toBe(false);
    // Sent long before the answer: counted from the answer, it is far from due.
    reach.failed(new CommandTimeoutError(600_000, true), performance.now() - 600_000);
    expect(reach.watching).toBe(true);
    expect(seen).toEqual([]);
    reach.answered();
    expect(reach.watching).toBe(false);
    expect(seen).toEqual([]);
  });

  it('takes no refusal, closed client or error of its own for an outage; a refusal is an answer', () => {
    const { reach, seen } = setUp(true, 60_000);
    track(reach);
    reach.failed(new ErrorReply('WRONGTYPE Operation against a key holding the wrong kind of value'));
    reach.failed(new Error('The client is closed'));
    reach.failed(new LockError('REDIS_ERROR', 'Redis failed while acquiring lock "x"'));
    expect(reach.watching).toBe(false);
    reach.failed(new ErrorReply('LOADING Redis is loading the dataset in memory'));
    expect(reach.watching).toBe(true);
    reach.failed(new ErrorReply('NOPERM this user has no permissions'));
    expect(reach.watching).toBe(false);
    expect(seen).toEqual([]);
  });

  it('with report off, and once closed, says nothing', async () => {
    const quiet = setUp(false);
    track(quiet.reach);
    quiet.reach.failed(new CommandTimeoutError(10, false));
    const closed = setUp();
    closed.reach.failed(new CommandTimeoutError(10, false));
    closed.reach.close();
    await sleep(2 * THRESHOLD_MS);
    quiet.reach.answered();
    expect(quiet.seen).toEqual([]);
    expect(closed.seen).toEqual([]);
  });
});
