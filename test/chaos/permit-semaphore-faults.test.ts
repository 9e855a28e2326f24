/**
 * Faults of a permit semaphore's holders, as real Node processes against a redis-server of this
 * file's own:
 *   - a holder killed (SIGKILL): its permit comes back within one lease, and a process waiting
 *     for it gets it — announced by nothing, found by the waiter's earliest-expiry bound;
 *   - a holder frozen (SIGSTOP) past its lease: another process gets the permit; once thawed, the
 *     frozen holder's lease reports the loss and its release gives back no permit;
 *   - several processes contending for P permits under SCRIPT FLUSH and CLIENT KILL: never more
 *     than P holds overlap, and the counter is back at P at the end.
 * Times are monotonic nanosecond stamps, comparable across the processes of the machine.
 */
import { describe, expect, it } from 'vitest';
import type { Worker, WorkerMessage } from '../support/child.js';
import { uniquePrefix } from '../support/keys.js';
import { sleep } from '../support/wait.js';
import { ownServer } from './own-server.js';

const PROCESS = new URL('./fixtures/permit-holder.ts', import.meta.url).pathname;
const LEASE_MS = 1_000;
/** A worker starts through tsx, slowly on a loaded machine. */
const STARTUP_MS = 30_000;

function stampOf(message: WorkerMessage, field: string): bigint {
  return BigInt(String(message[field]));
}

describe('permit semaphore: holder faults', () => {
  const env = ownServer();

  function holder(prefix: string, name: string, permits: number): Worker {
    return env.res.worker(PROCESS, {
      REDIS_URL: env.server.url,
      KEY_PREFIX: prefix,
      NAME: name,
      PERMITS: String(permits),
      WATCHDOG_MS: String(LEASE_MS),
    });
  }

  async function acquired(worker: Worker, timeoutMs = 10_000): Promise<WorkerMessage> {
    return worker.next(
      (msg) => msg.type === 'acquired' || msg.type === 'timeout' || msg.type === 'failed',
      timeoutMs,
    );
  }

  it('gives a SIGKILLed holder’s permit to a waiting process within one lease', async () => {
    const prefix = uniquePrefix('permit-kill');
    const victim = holder(prefix, 'crawl:example.com', 1);
    const waiter = holder(prefix, 'crawl:example.com', 1);
    await Promise.all([
      victim.next((m) => m.type === 'ready', STARTUP_MS),
      waiter.next((m) => m.type === 'ready', STARTUP_MS),
    ]);
    victim.send({ type: 'acquire' });
    expect((await acquired(victim)).type).toBe('acquired');
    waiter.send({ type: 'acquire', waitMs: 10_000 });
    await waiter.next((m) => m.type === 'waiting');
    await sleep(200);

    const killedAt = process.hrtime.bigint();
    victim.kill('SIGKILL');
    const taken = await acquired(waiter);
    expect(taken.type).toBe('acquired');
    const tookMs = Number(stampOf(taken, 'at') - killedAt) / 1e6;
    // Within the lease the victim's last renewal set, plus the waiter's re-check and a margin.
    expect(tookMs).toBeLessThan(LEASE_MS + 1_000);
    expect(await env.admin.get(`${prefix}crawl:example.com`)).toBe('0');
    waiter.send({ type: 'release' });
    expect((await waiter.next((m) => m.type === 'release-result')).ok).toBe(true);
    expect(await env.admin.get(`${prefix}crawl:example.com`)).toBe('1');
    expect(await env.admin.exists(`{${prefix}crawl:example.com}:timeout`)).toBe(0);
  });

  it('gives a SIGSTOPped holder’s permit to another process; thawed, it reports the loss and adds no permit', async () => {
    const prefix = uniquePrefix('permit-stop');
    const name = 'render:gpu';
    const key = `${prefix}${name}`;
    const frozen = holder(prefix, name, 1);
    const other = holder(prefix, name, 1);
    await Promise.all([
      frozen.next((m) => m.type === 'ready', STARTUP_MS),
      other.next((m) => m.type === 'ready', STARTUP_MS),
    ]);
    frozen.send({ type: 'acquire' });
    expect((await acquired(frozen)).type).toBe('acquired');
    other.send({ type: 'acquire', waitMs: 15_000 });
    await other.next((m) => m.type === 'waiting');

    frozen.kill('SIGSTOP');
    try {
      expect((await acquired(other)).type).toBe('acquired');
      // Held by the other process for a while longer than the frozen one's lease.
      await sleep(LEASE_MS);
    } finally {
      frozen.kill('SIGCONT');
    }
    const abort = await frozen.next((m) => m.type === 'abort', 5_000);
    expect(['expired', 'not-owner']).toContain(abort.reason);
    const lost = await frozen.next((m) => m.type === 'lockLost', 5_000);
    expect(String(lost.message)).not.toMatch(/[0-9a-f]{32}/);

    frozen.send({ type: 'release' });
    const late = await frozen.next((m) => m.type === 'release-result');
    expect(late).toMatchObject({ ok: false, code: 'NOT_OWNER' });
    // The other process still holds the only permit: nothing was added.
    expect(await env.admin.get(key)).toBe('0');
    expect(await env.admin.zCard(`{${key}}:timeout`)).toBe(1);
    other.send({ type: 'release' });
    expect((await other.next((m) => m.type === 'release-result')).ok).toBe(true);
    expect(await env.admin.get(key)).toBe('1');
  });

  it('never lets more than P hold at once while scripts are flushed and connections killed', async () => {
    const prefix = uniquePrefix('permit-contend');
    const name = 'fetch:api.example.com';
    const key = `${prefix}${name}`;
    const PERMITS = 2;
    const WORKERS = 5;
    const ROUNDS = 8;
    const workers = Array.from({ length: WORKERS }, () => holder(prefix, name, PERMITS));
    await Promise.all(workers.map((worker) => worker.next((m) => m.type === 'ready', STARTUP_MS)));
    for (const worker of workers)
      worker.send({ type: 'contend', rounds: ROUNDS, holdMs: 30, waitMs: 20_000 });

    let faults = 0;
    const done = Promise.all(workers.map((worker) => worker.next((m) => m.type === 'contended', 60_000)));
    let finished = false;
    void done.finally(() => {
      finished = true;
    });
    while (!finished) {
      await sleep(150);
      if (faults % 2 === 0) await env.admin.scriptFlush();
      else await env.admin.sendCommand(['CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes']);
      faults += 1;
    }
    await done;
    expect(faults).toBeGreaterThan(2);

    const turns = workers.flatMap((worker) => worker.messages.filter((m) => m.type === 'turn'));
    expect(turns.length).toBeGreaterThan(WORKERS * ROUNDS * 0.5);
    // A hold that was lost meanwhile did not count as exclusive; none should have been.
    expect(turns.filter((turn) => turn.lost === true)).toEqual([]);
    const edges = turns
      .flatMap((turn) => [
        { at: stampOf(turn, 'from'), step: 1 },
        { at: stampOf(turn, 'to'), step: -1 },
      ])
      .sort((a, b) => (a.at === b.at ? a.step - b.step : a.at < b.at ? -1 : 1));
    let holding = 0;
    let most = 0;
    for (const edge of edges) {
      holding += edge.step;
      most = Math.max(most, holding);
    }
    expect(most).toBeLessThanOrEqual(PERMITS);
    expect(most).toBe(PERMITS);

    for (const worker of workers) worker.send({ type: 'exit' });
    await Promise.all(workers.map((worker) => worker.exited));
    // Every permit is back: released, or given back when its lease ended.
    await sleep(LEASE_MS + 200);
    const observer = (await env.res.lockClient({ keyPrefix: prefix })).permitSemaphore(name);
    expect(await observer.availablePermits()).toBe(PERMITS);
    expect(await env.admin.get(key)).toBe(String(PERMITS));
    expect(await env.admin.zCard(`{${key}}:timeout`)).toBe(0);
    const errors = workers.flatMap((worker) => worker.messages.filter((m) => m.type === 'error'));
    console.info(
      `[permit-semaphore contention] ${turns.length} turns, ${faults} faults, ${errors.length} failed rounds`,
    );
  }, 120_000);
});
