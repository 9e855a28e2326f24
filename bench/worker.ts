// Entry of a benchmark worker process: runs the worker side of every scenario on request from
// the parent (bench/run.ts) over Node IPC.
import type { ContenderName } from './contenders/types.js';
import { contendedOps } from './scenarios/contended.js';
import { handoffOps } from './scenarios/handoff.js';
import { manyKeysOps } from './scenarios/many-keys.js';
import { manyKeysKindOps } from './scenarios/many-keys-kinds.js';
import { profileOps } from './profile/worker-ops.js';
import { reentryOps } from './scenarios/reentry.js';
import { scalingOps } from './scenarios/scaling.js';
import { uncontendedOps } from './scenarios/uncontended.js';
import type { WorkerOps } from './scenarios/common.js';
import {
  closeAll,
  closeSession,
  emit,
  go,
  openSession,
  takeUnhandledReasons,
  unhandledCount,
} from './worker-state.js';

const baseOps: WorkerOps = {
  async connect(args) {
    await openSession(
      String(args['session']),
      args['contender'] as ContenderName,
      String(args['url']),
      String(args['name']),
      typeof args['leaseMs'] === 'number' ? args['leaseMs'] : undefined,
      typeof args['permits'] === 'number' ? args['permits'] : undefined,
    );
    return null;
  },
  async disconnect(args) {
    await closeSession(String(args['session']));
    return null;
  },
  unhandled() {
    return Promise.resolve(unhandledCount());
  },
  unhandledReasons() {
    return Promise.resolve(takeUnhandledReasons());
  },
  async exit() {
    await closeAll();
    setTimeout(() => process.exit(0), 50);
    return null;
  },
};

const ops: WorkerOps = {
  ...baseOps,
  ...uncontendedOps,
  ...reentryOps,
  ...handoffOps,
  ...contendedOps,
  ...manyKeysOps,
  ...manyKeysKindOps,
  ...scalingOps,
  ...profileOps,
};

interface Incoming {
  readonly id?: number;
  readonly op?: string;
  readonly go?: boolean;
  readonly [field: string]: unknown;
}

process.on('message', (message: Incoming) => {
  if (message.go === true) {
    go();
    return;
  }
  const { id, op } = message;
  if (id === undefined || op === undefined) return;
  const handler = ops[op];
  if (handler === undefined) {
    process.send?.({ id, ok: false, error: `unknown op ${op}` });
    return;
  }
  handler(message).then(
    (result) => process.send?.({ id, ok: true, result }),
    (error: unknown) =>
      process.send?.({
        id,
        ok: false,
        error: error instanceof Error ? (error.stack ?? error.message) : String(error),
      }),
  );
});

emit({ event: 'up' });
