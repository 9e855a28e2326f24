// Each latchkey kind beside the floor and its closest peer, measured in the same run: the
// figures of the report's "Every kind" table and the verdict of each row.
import type { Results } from '../results-model.js';
import { fmt, metric, ratio, x } from './common.js';

/**
 * One latchkey kind beside its floor and its closest peer: which contender it is, what it is
 * held against, and the peer (if any library has one).
 */
const KIND_ROWS: readonly {
  readonly contender: string;
  readonly kind: string;
  readonly peers: readonly string[];
}[] = [
  {
    contender: 'latchkey',
    kind: 'lock (reentrant)',
    peers: ['node-redisson', 'redis-semaphore', 'redlock', 'sesame-redlock'],
  },
  {
    contender: 'latchkey-fenced',
    kind: 'fenced lock',
    peers: ['node-redisson', 'redlock', 'sesame-redlock'],
  },
  { contender: 'latchkey-simple', kind: 'simple lock', peers: ['simple-redis-mutex', 'redis-semaphore'] },
  { contender: 'latchkey-fair', kind: 'fair lock', peers: [] },
  { contender: 'latchkey-rw', kind: 'read-write lock (write)', peers: [] },
  { contender: 'latchkey-semaphore', kind: 'semaphore', peers: ['rs-semaphore', 'rs-multisemaphore'] },
  { contender: 'latchkey-permits', kind: 'permit semaphore', peers: ['rs-semaphore', 'rs-multisemaphore'] },
];

export interface KindRow {
  readonly contender: string;
  readonly kind: string;
  readonly cycleMs: number | undefined;
  /** The uncontended cycle against floor-2evalsha's. */
  readonly vsFloor: number | undefined;
  readonly handoffMs: number | undefined;
  readonly acqPerSec: number | undefined;
  readonly roundTrips: number | undefined;
  readonly semaphoreAcqPerSec: number | undefined;
  /** Markdown: failed scenarios, or the ratios to the best peer (or to the floor if none). */
  readonly verdict: string;
}

/** A row per latchkey kind measured in the run, in KIND_ROWS' order. */
export function kindVerdicts(results: Results): KindRow[] {
  const m = (scenario: string, contender: string, name: string): number | undefined =>
    metric(results, scenario, contender, name);
  const floor = m('uncontended', 'floor-2evalsha', 'p50Ms');
  const rows = KIND_ROWS.filter((row) => results.scenarios['uncontended']?.[row.contender] !== undefined);
  return rows.map((row) => {
    const cycle = m('uncontended', row.contender, 'p50Ms');
    const handoff = m('handoff', row.contender, 'p50Ms');
    const rate = m('contended-8', row.contender, 'acqPerSec');
    const failed = ['uncontended', 'handoff', 'contended-8', 'semaphore-4'].filter(
      (scenario) => results.failed[scenario]?.[row.contender] !== undefined,
    );
    const peers = row.peers.filter((peer) => m('contended-8', peer, 'acqPerSec') !== undefined);
    const bestPeer = peers
      .map((peer) => ({ peer, rate: m('contended-8', peer, 'acqPerSec') ?? 0 }))
      .sort((a, b) => b.rate - a.rate)[0];
    const peerHandoff = Math.min(
      ...row.peers.map((peer) => m('handoff', peer, 'p50Ms') ?? Number.POSITIVE_INFINITY),
    );
    let verdict: string;
    if (failed.length > 0) verdict = `**FAILED** in ${failed.join(', ')}`;
    else if (bestPeer === undefined)
      verdict = `no peer; cycle ${x(ratio(cycle, floor))} the floor, hand-off ${fmt(handoff)} ms`;
    else
      verdict = `${x(ratio(rate, bestPeer.rate))} the acquisitions/s of ${bestPeer.peer}${
        Number.isFinite(peerHandoff)
          ? `, hand-off ${x(ratio(peerHandoff, handoff))} faster than the fastest peer's`
          : ''
      }`;
    return {
      contender: row.contender,
      kind: row.kind,
      cycleMs: cycle,
      vsFloor: ratio(cycle, floor),
      handoffMs: handoff,
      acqPerSec: rate,
      roundTrips: m('contended-8', row.contender, 'roundTripsPerAcq'),
      semaphoreAcqPerSec: m('semaphore-4', row.contender, 'acqPerSec'),
      verdict,
    };
  });
}
