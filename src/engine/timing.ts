/** Told when a signal aborts; must not throw. @internal */
export interface AbortWatcher {
  handleEvent(): void;
}

/**
 * The watchers of each signal. A signal gets one listener of latchkey's, whatever the number of
 * acquires, waits and commands that watch it: a caller may pass one signal (a shutdown signal,
 * say) to any number of calls, and a signal warns of a leak past ten listeners.
 */
const watchers = new WeakMap<AbortSignal, Set<AbortWatcher>>();

function dispatchAbort(this: AbortSignal): void {
  const watching = watchers.get(this);
  if (watching === undefined) return;
  watchers.delete(this);
  for (const watcher of watching) watcher.handleEvent();
}

/**
 * Calls `watcher.handleEvent()` once when `signal` aborts, unless {@link unwatchAbort} is called
 * first. Nothing is called for a signal that aborted already.
 * @internal
 */
export function watchAbort(signal: AbortSignal, watcher: AbortWatcher): void {
  let watching = watchers.get(signal);
  if (watching === undefined) {
    watching = new Set();
    watchers.set(signal, watching);
    signal.addEventListener('abort', dispatchAbort, { once: true });
  }
  watching.add(watcher);
}

/** Stops watching `signal` for `watcher`; the signal's listener goes with its last watcher. @internal */
export function unwatchAbort(signal: AbortSignal, watcher: AbortWatcher): void {
  const watching = watchers.get(signal);
  if (watching === undefined || !watching.delete(watcher) || watching.size > 0) return;
  watchers.delete(signal);
  signal.removeEventListener('abort', dispatchAbort);
}

/**
 * `work`, unless `signal` aborts first: then rejects with `signal.reason` at once (even if it had
 * aborted already), and `work` goes on unobserved.
 * @internal
 */
export function abortable<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const watcher: AbortWatcher = { handleEvent: () => reject(signal.reason) };
    watchAbort(signal, watcher);
    work.then(resolve, reject).finally(() => unwatchAbort(signal, watcher));
  });
}

/** Waits for `work` for at most `ms` milliseconds; never rejects. @internal */
export async function within(work: Promise<unknown>, ms: number): Promise<void> {
  if (ms <= 0) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    work.catch(() => undefined),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, ms);
      timer.unref();
    }),
  ]);
  clearTimeout(timer);
}
