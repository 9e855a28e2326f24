import type { LockClient } from '../../index.js';
import type { Connection } from '../connection.js';
import type { ExitCode } from '../exit-codes.js';
import type { Probe } from '../probe.js';
import type { Holder, HolderLabels, LockKind, Permits, Snapshot, Waiter } from '../model.js';

/** What a kind's reader makes of a probe: the kind's part of a {@link Snapshot}. @internal */
export interface KindState {
  readonly holders: readonly Holder[];
  /** Undefined: the key's own PTTL. */
  readonly ttlMs?: number | null;
  readonly mode?: 'read' | 'write';
  readonly permits?: Permits;
  readonly count?: number;
  readonly waiting?: number;
  readonly waiters?: readonly Waiter[];
}

/** What a reader may use beyond the probe (a kind that reads more after it). @internal */
export interface ReadContext {
  readonly redis: Connection;
  readonly labels: HolderLabels;
  readonly details: boolean;
}

/** Something whose holders `force-unlock` can take the lock from: a handle of the kind. @internal */
export interface ForceUnlockable {
  forceUnlock(): Promise<boolean>;
}

/** What `force-unlock` does with a kind. @internal */
export type UnlockPolicy =
  | {
      readonly action: 'unlock';
      /** A handle of the kind, whose own `forceUnlock()` frees it the kind's way. */
      handle(locks: LockClient, name: string): ForceUnlockable;
      /** What happens to holders and waiters, for the confirmation question. */
      readonly effect: string;
      /** Why there is nothing to free when nobody holds it: `no permit is out`. */
      readonly nothingHeld: string;
    }
  | {
      readonly action: 'refuse';
      readonly code: ExitCode;
      /** Names the kind, why it is not touched, and what to do instead. */
      reason(snapshot: Snapshot): string;
    };

/**
 * One kind's layout: how to tell it (recognizer), read it (reader), print it (renderer) and
 * free it (force-unlock policy). The CLI knows a kind through its entry in the table in
 * layouts/index.ts and nowhere else. @internal
 */
export interface Layout {
  readonly kind: LockKind;
  /** Whether the probe shows this kind's layout; entries are tried in the table's order. */
  recognize(probe: Probe): boolean;
  /**
   * The kinds this layout cannot tell the key apart from (itself included), when there are:
   * a `--kind` or what `watch` saw before picks one of them.
   */
  candidates?(probe: Probe): LockKind[];
  read(probe: Probe, context: ReadContext): KindState | Promise<KindState>;
  /** The kind as text: `lock (fenced)`, `counter (semaphore or count-down latch)`. */
  title(snapshot: Snapshot): string;
  /** `inspect`'s rows after name, key and kind. */
  rows(snapshot: Snapshot): string[];
  /** `watch`'s parts of a line after the time and the kind. */
  parts(snapshot: Snapshot): string[];
  /** `list`'s HOLDERS and COUNT cells. */
  cells(snapshot: Snapshot): { readonly holders: string; readonly count: string };
  readonly unlock: UnlockPolicy;
}
