import { lockKey, readWriteChannel, simpleUnlockChannel, unlockChannel } from '../../keys.js';
import { ExitCode } from '../exit-codes.js';
import { probedChannels } from '../probe.js';
import { jsonLine, watchLine } from '../render.js';
import { isPresent, readSnapshot, summary, type LockKind, type Snapshot } from '../snapshot.js';
import type { CommandContext } from './context.js';

/** What `watch` compares between reads; a line is printed when one of them changes. */
const ASPECTS = ['kind', 'holders', 'ttl', 'waiting', 'token', 'mode', 'permits', 'count'] as const;
type Aspect = (typeof ASPECTS)[number];

/**
 * The TTL's range: powers of two of milliseconds (16.4-32.8 s, 8.2-16.4 s, ...). A renewed lock
 * stays in one range; a lock whose renewals stopped crosses one ever sooner as it runs out.
 */
function ttlRange(ttlMs: number | null): number | null {
  return ttlMs === null ? null : Math.floor(Math.log2(Math.max(1, ttlMs)));
}

function aspect(snapshot: Snapshot, which: Aspect): unknown {
  switch (which) {
    case 'kind':
      return snapshot.kind;
    case 'holders':
      // Who holds and how often; their leases' time left is the `ttl` aspect.
      return JSON.stringify(snapshot.holders.map(({ label, holdCount, role }) => [label, holdCount, role]));
    case 'ttl':
      return JSON.stringify(
        [snapshot.ttlMs, ...snapshot.holders.map((holder) => holder.leaseMs)].map(ttlRange),
      );
    case 'waiting':
      return snapshot.waiting;
    case 'token':
      return snapshot.fencingToken;
    case 'mode':
      return snapshot.mode;
    case 'permits':
      return JSON.stringify(snapshot.permits);
    case 'count':
      return snapshot.count;
  }
}

/** Resolves after `ms`, or sooner when `wakeUp.wake` is called or `signal` aborts. */
function pause(ms: number, signal: AbortSignal, wakeUp: { wake: (() => void) | undefined }): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      wakeUp.wake = undefined;
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
    wakeUp.wake = done;
  });
}

/**
 * `latchkey watch <name>`: reads the key every `intervalMs` — and at once when one of the kinds'
 * channels announces a release — and prints a line (or a JSON object) whenever its kind, holders
 * or hold counts, TTL range, queue length, fencing token, mode, permits or count changed. The
 * first line is the state it found. A counter that could be several kinds is read as the kind
 * seen before (or `kind`). Stops on Ctrl-C, after `count` lines or after `durationMs`, exit 0.
 * @internal
 */
export async function watch(
  context: CommandContext,
  name: string,
  intervalMs: number,
  count: number | undefined,
  durationMs: number | undefined,
  kind?: LockKind,
): Promise<ExitCode> {
  const { io, redis, options, labels } = context;
  const key = lockKey(options.prefix, name);
  const stop = new AbortController();
  const onInterrupt = (): void => stop.abort();
  io.interrupted.addEventListener('abort', onInterrupt, { once: true });
  const deadline = durationMs === undefined ? undefined : setTimeout(onInterrupt, durationMs);
  const wakeUp: { wake: (() => void) | undefined; pending: boolean } = { wake: undefined, pending: false };
  try {
    // Every kind's channel: a key may change kind while watched. A fair lock tells only its next
    // waiter, on a channel of its own: the interval sees its changes. The probe does not count
    // this subscriber among the semaphore's or latch's listeners.
    const { semaphore, latch } = probedChannels(key);
    const ownChannels = new Set([semaphore, latch]);
    await redis.subscribe(
      [unlockChannel(key), simpleUnlockChannel(key), readWriteChannel(key), semaphore, latch],
      () => {
        wakeUp.pending = true;
        wakeUp.wake?.();
      },
    );
    let last: Snapshot | undefined;
    let printed = 0;
    do {
      wakeUp.pending = false;
      const seen = last !== undefined && isPresent(last) ? last.kind : kind;
      const snapshot = await readSnapshot(redis, name, key, labels, {
        details: false,
        ownChannels,
        ...(seen === undefined ? {} : { hint: seen }),
      });
      const previous = last;
      const changed =
        previous === undefined ? [] : ASPECTS.filter((a) => aspect(snapshot, a) !== aspect(previous, a));
      if (previous === undefined || changed.length > 0) {
        const at = new Date();
        io.stdout.write(
          options.json
            ? jsonLine({
                time: at.toISOString(),
                event: previous === undefined ? 'initial' : 'change',
                changed,
                ...summary(snapshot),
              })
            : watchLine(snapshot, at),
        );
        last = snapshot;
        printed += 1;
        if (count !== undefined && printed >= count) break;
      }
      // A release announced while reading is read at once.
      if (!wakeUp.pending && !stop.signal.aborted) await pause(intervalMs, stop.signal, wakeUp);
    } while (!stop.signal.aborted);
  } finally {
    clearTimeout(deadline);
    io.interrupted.removeEventListener('abort', onInterrupt);
  }
  return ExitCode.OK;
}
