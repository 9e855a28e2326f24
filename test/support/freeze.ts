/**
 * Freezing a process with SIGSTOP, and knowing from when it is frozen. kill() returns once the
 * signal is queued; the process stops when its thread next enters the kernel. A stamp taken
 * right after kill() is therefore not proof that nothing ran after it: this reads the process's
 * state in /proc until Linux reports it stopped, and stamps that.
 */
import { readFileSync } from 'node:fs';
import { now } from './stamps.js';
import { sleep } from './wait.js';

/** How long a process may take to stop before the freeze is reported as failed. */
const STOP_BOUND_MS = 5_000;

/** The state letter of `/proc/<pid>/stat` (after the command name, which may hold spaces). */
function processState(pid: number): string | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
}

/**
 * Sends SIGSTOP to `pid` and resolves with a monotonic stamp taken once the process is stopped:
 * anything it stamped later, it did after it was let go again.
 */
export async function freeze(pid: number): Promise<bigint> {
  process.kill(pid, 'SIGSTOP');
  const giveUpAt = performance.now() + STOP_BOUND_MS;
  for (;;) {
    const state = processState(pid);
    if (state === 'T' || state === 't') return now();
    if (state === undefined) throw new Error(`process ${pid} is gone: it cannot be frozen`);
    if (performance.now() > giveUpAt) {
      throw new Error(`process ${pid} did not stop within ${STOP_BOUND_MS} ms of SIGSTOP (state ${state})`);
    }
    await sleep(1);
  }
}
