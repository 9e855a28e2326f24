// State of one worker process: its open sessions, the start barrier, and a count of unhandled
// rejections (any one makes the run that saw it fail).
import { loadAdapter } from './contenders/load.js';
import type { ContenderName, Session } from './contenders/types.js';
import type { WorkerEvent } from './ipc.js';

const sessions = new Map<string, Session>();
let unhandled = 0;
const goWaiters: (() => void)[] = [];

/** The first few distinct messages of unhandled rejections since they were last taken. */
const reasons: string[] = [];
const REASONS_KEPT = 3;

process.on('unhandledRejection', (error: unknown) => {
  unhandled += 1;
  if (reasons.length >= REASONS_KEPT) return;
  const text = (
    error instanceof Error ? `${error.name}: ${error.message.split('\n')[0] ?? ''}` : String(error)
  ).slice(0, 200);
  if (!reasons.includes(text)) reasons.push(text);
});

export function unhandledCount(): number {
  return unhandled;
}

/** The messages kept since the last call (see `reasons`), and forgets them. */
export function takeUnhandledReasons(): string[] {
  return reasons.splice(0);
}

export function emit(event: WorkerEvent): void {
  process.send?.(event);
}

/** Resolves on the parent's next "go" message. */
export function untilGo(): Promise<void> {
  return new Promise((resolve) => goWaiters.push(resolve));
}

export function go(): void {
  for (const resolve of goWaiters.splice(0)) resolve();
}

export async function openSession(
  id: string,
  contender: ContenderName,
  url: string,
  name: string,
  leaseMs: number | undefined,
  permits?: number,
): Promise<void> {
  const adapter = await loadAdapter(contender);
  const session = await adapter.connect({ url, name, leaseMs, permits });
  sessions.set(id, session);
}

export function session(id: string): Session {
  const found = sessions.get(id);
  if (found === undefined) throw new Error(`no session ${id}`);
  return found;
}

export async function closeSession(id: string): Promise<void> {
  const found = sessions.get(id);
  sessions.delete(id);
  if (found === undefined) return;
  await Promise.race([found.close(), new Promise((resolve) => setTimeout(resolve, 5_000).unref())]);
}

export async function closeAll(): Promise<void> {
  await Promise.all([...sessions.keys()].map((id) => closeSession(id)));
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** This process's used heap after a full GC (workers run with --expose-gc). */
export function heapAfterGc(): number {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error('run the worker with --expose-gc');
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

/**
 * The lowest of `samples` readings of {@link heapAfterGc}, `everyMs` apart: work that happens to
 * be in flight at one of them (a request, what a previous step still lets go of) is not counted
 * as kept.
 */
export async function lowestHeapAfterGc(samples = 3, everyMs = 500): Promise<number> {
  let heap = heapAfterGc();
  for (let sample = 1; sample < samples; sample += 1) {
    await sleep(everyMs);
    heap = Math.min(heap, heapAfterGc());
  }
  return heap;
}

/** Runs `task` for 0..count-1, `width` at a time. */
export async function inBatches<T>(
  count: number,
  width: number,
  task: (index: number) => Promise<T>,
): Promise<T[]> {
  const results: T[] = [];
  for (let start = 0; start < count; start += width) {
    const batch = Array.from({ length: Math.min(width, count - start) }, (_, i) => task(start + i));
    results.push(...(await Promise.all(batch)));
  }
  return results;
}
