/**
 * One process-wide list of synchronous clean-up actions (killing redis-server children,
 * killing worker processes), run when the test process goes away.
 *
 * The list lives on globalThis under a registered symbol: a test runner may evaluate this
 * module more than once in the same process (one module graph per test file), and each
 * copy must not install its own set of process listeners.
 */

type Cleanup = () => void;

interface CleanupRegistry {
  readonly actions: Set<Cleanup>;
  ran: boolean;
}

const REGISTRY_KEY = Symbol.for('latchkey.test.cleanup');

// Signals after which the process would otherwise die without emitting 'exit'.
const FATAL_SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

function runAll(registry: CleanupRegistry): void {
  if (registry.ran) return;
  registry.ran = true;
  for (const action of registry.actions) {
    try {
      action();
    } catch {
      // A failing clean-up must not stop the others from running.
    }
  }
  registry.actions.clear();
}

function install(): CleanupRegistry {
  const holder = globalThis as unknown as Record<symbol, CleanupRegistry | undefined>;
  const existing = holder[REGISTRY_KEY];
  if (existing !== undefined) return existing;

  const registry: CleanupRegistry = { actions: new Set(), ran: false };
  holder[REGISTRY_KEY] = registry;

  // Only synchronous work is possible in 'exit'; every action is written to be synchronous.
  process.on('exit', () => runAll(registry));

  for (const signal of FATAL_SIGNALS) {
    const onSignal = (): void => {
      runAll(registry);
      process.removeListener(signal, onSignal);
      // Installing a listener replaced Node's default "die on this signal". If nobody
      // else (e.g. the test runner) is listening, restore that behaviour by re-raising.
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
    };
    process.on(signal, onSignal);
  }
  return registry;
}

/** Registers a synchronous clean-up; returns a function that unregisters it. */
export function onProcessExit(action: Cleanup): () => void {
  const registry = install();
  registry.actions.add(action);
  return () => {
    registry.actions.delete(action);
  };
}
