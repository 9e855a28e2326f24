// The shape of a profile run's results, as bench/results/profile.json has them and the report
// (report/render-profile.ts) reads them. Bytes are per waiter, times per cycle.
import type { Category } from './origins.js';

export interface ProfileEnv {
  readonly date: string;
  readonly node: string;
  readonly redis: string;
  readonly cpuModel: string;
  readonly cores: number;
  readonly os: string;
  /** Load averages (1, 5, 15 min) at the start: the machine may be shared. */
  readonly loadAverage: readonly number[];
  readonly seconds: number;
}

/** One type's share of the heap a waiter adds, in bytes per waiter. */
export interface HeapType {
  readonly type: string;
  /** Objects of this type per waiter, added since the first snapshot. */
  readonly objects: number;
  readonly added: number;
  /** Objects of this type gone since the first snapshot (replaced: a renewal's, a timer's). */
  readonly gone: number;
  /** added - gone. */
  readonly net: number;
  /** What holds most of the added bytes (`Type.field`), with its share of them. */
  readonly heldBy: string;
}

/** The bytes (per held key or waiter) that one function's calls allocated and that were still alive. */
export interface HeapSite {
  readonly site: string;
  readonly category: Category;
  readonly bytes: number;
}

/**
 * One step of a heap pass weighed by two heap snapshots: the holds (before any lock is taken,
 * and once all are held) or the waits (then, and once every lock has its waiter). Bytes per
 * held lock, or per waiter.
 */
export interface HeapShare {
  /** The many-keys scenario's own figure in this run: used heap after GC. */
  readonly measured: number;
  /** Both snapshots' summed self sizes: the second's less the first's. */
  readonly snapshotDelta: number;
  /** Added and gone objects' bytes. */
  readonly added: number;
  readonly gone: number;
  /** The largest types by net bytes, then one `(others)` row. */
  readonly types: readonly HeapType[];
  /**
   * The sampling heap profile's estimate of the bytes allocated between the snapshots and
   * still alive at the second; then those bytes by the library whose code allocated them, and
   * the functions that allocated the most.
   */
  readonly sampled: number;
  readonly byCategory: Readonly<Partial<Record<Category, number>>>;
  readonly sites: readonly HeapSite[];
}

/** One contender's held locks, each with a waiter, weighed by three heap snapshots. */
export interface HeapPass {
  /** e.g. `latchkey Lock`, `floor-pubsub`. */
  readonly label: string;
  readonly contender: string;
  readonly kind: 'lock' | 'semaphore' | 'latch';
  /** Held keys, each with one waiter. */
  readonly waiters: number;
  readonly holder: HeapShare;
  readonly waiter: HeapShare;
}

/** One function's self time, in µs per cycle. */
export interface CpuFunction {
  readonly label: string;
  readonly category: Category;
  readonly us: number;
}

/** One process's samples inside a contender's cycles. */
export interface CpuRole {
  /** `process` (the uncontended loop), or `holder` / `waiter` (the hand-off's two processes). */
  readonly role: string;
  readonly samples: number;
  /** µs per cycle by category of the function sampled; idle is the event loop waiting. */
  readonly categories: Readonly<Record<Category, number>>;
  /**
   * µs per cycle by the library (or the benchmark) whose function is innermost on the stack:
   * Node's work laid to the code that asked for it; what no such code asked for keeps its own
   * category (GC, idle, native, Node's own event loop).
   */
  readonly callers: Readonly<Record<Category, number>>;
  /** The functions with the most self time outside idle, µs per cycle. */
  readonly functions: readonly CpuFunction[];
  /** Node's own time (the `node` category) by module, µs per cycle. */
  readonly modules: Readonly<Record<string, number>>;
}

/** A loop of one contender under the profiler. */
export interface CpuLoop {
  readonly loop: 'uncontended' | 'handoff';
  readonly contender: string;
  readonly cycles: number;
  /** Wall time per cycle (the windows' total over the cycles), µs. */
  readonly wallUs: number;
  /** The median window, µs: a hand-off's p50 or an uncontended cycle's mean per block. */
  readonly medianUs: number;
  /** Bytes Redis received per cycle (INFO stats), in the uncontended loop. */
  readonly bytesToRedis?: number;
  readonly roles: readonly CpuRole[];
}

export interface ProfileResults {
  readonly env: ProfileEnv;
  readonly heap: { readonly waiters: number; readonly passes: readonly HeapPass[] };
  readonly cpu: {
    readonly intervalUs: number;
    /** What a hand-off's window is, and an uncontended cycle's. */
    readonly windows: Readonly<Record<CpuLoop['loop'], string>>;
    readonly loops: readonly CpuLoop[];
  };
}
