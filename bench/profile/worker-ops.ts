// The worker side of `npm run bench:profile` (bench/profile.ts): V8's sampling CPU profiler and
// its heap snapshots, driven over the worker protocol, and a timed block of uncontended cycles.
// What is held and waited on comes from the many-keys scenario's own ops; the hand-off from the
// hand-off scenario's. Nothing here reads a profile: the parent does (cpu-profile.ts,
// heap-snapshot.ts).
import { writeFileSync } from 'node:fs';
import { Session as Inspector } from 'node:inspector/promises';
import { writeHeapSnapshot } from 'node:v8';
import { nowNs } from '../ipc.js';
import { num, str, type WorkerOps } from '../scenarios/common.js';
import { heapAfterGc, session } from '../worker-state.js';

let inspector: Inspector | undefined;

/** This process's inspector session, connected on first use. */
function connected(): Inspector {
  if (inspector === undefined) {
    inspector = new Inspector();
    inspector.connect();
  }
  return inspector;
}

export const profileOps: WorkerOps = {
  /** Starts the sampling profiler with a sample every `intervalUs` microseconds. */
  async 'profile.cpuStart'(args) {
    const profiler = connected();
    await profiler.post('Profiler.enable');
    await profiler.post('Profiler.setSamplingInterval', { interval: num(args, 'intervalUs') });
    await profiler.post('Profiler.start');
    return null;
  },
  /** Stops the profiler and writes its profile (V8's JSON) to `path`. */
  async 'profile.cpuStop'(args) {
    const { profile } = await connected().post('Profiler.stop');
    writeFileSync(str(args, 'path'), JSON.stringify(profile));
    return null;
  },
  /** Starts V8's sampling heap profiler: one sample per `intervalBytes` allocated, on average. */
  async 'profile.heapSampling'(args) {
    const profiler = connected();
    await profiler.post('HeapProfiler.enable');
    await profiler.post('HeapProfiler.startSampling', { samplingInterval: num(args, 'intervalBytes') });
    return null;
  },
  /**
   * After a full GC (which drops the samples of objects gone), stops the sampling heap profiler
   * and writes what it sampled to `path`. An op of its own: the profile, a large object, is
   * garbage before the next snapshot.
   */
  async 'profile.heapSamplingStop'(args) {
    heapAfterGc();
    const { profile } = await connected().post('HeapProfiler.stopSampling');
    writeFileSync(str(args, 'path'), JSON.stringify(profile));
    return null;
  },
  /** Writes a heap snapshot to `path` after a full GC. */
  'profile.heapSnapshot'(args) {
    heapAfterGc();
    writeHeapSnapshot(str(args, 'path'));
    return Promise.resolve(null);
  },
  /**
   * `cycles` uncontended acquire + release cycles of one session on key `key`; returns the
   * block's [start, end] on the shared clock (ns), so the samples of the block can be told
   * from those of the harness around it.
   */
  async 'profile.cycles'(args) {
    const locks = session(str(args, 'session'));
    const key = str(args, 'key');
    const cycles = num(args, 'cycles');
    const start = nowNs();
    for (let i = 0; i < cycles; i += 1) {
      const held = await locks.acquire(key);
      await held.release();
    }
    return [start, nowNs()];
  },
};
