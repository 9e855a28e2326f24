// Reads a V8 sampling heap profile (the JSON `HeapProfiler.stopSampling` returns): the
// allocations sampled since sampling began that were still alive when it stopped, by the stack
// that made them, each node's bytes scaled by V8 to an estimate of all such allocations. Laid to
// the code that caused them: the innermost function of the stack that is not Node's own (a
// timer is laid to the code that set it, not to node:timers).
import { readFileSync } from 'node:fs';
import type { Category, Frame, Origin, Origins } from './origins.js';

interface SamplingNode {
  readonly callFrame: Frame;
  readonly selfSize: number;
  readonly children: readonly SamplingNode[];
}

interface SamplingProfileFile {
  readonly head: SamplingNode;
}

/** Estimated bytes still alive by the code that allocated them. */
export interface AllocationSites {
  readonly total: number;
  readonly sites: ReadonlyMap<string, { readonly category: Category; bytes: number }>;
}

export function readAllocationSites(path: string, origins: Origins): AllocationSites {
  const profile = JSON.parse(readFileSync(path, 'utf8')) as SamplingProfileFile;
  const sites = new Map<string, { readonly category: Category; bytes: number }>();
  let total = 0;
  // `site`: the innermost frame so far that is not Node's own, if any; else the node's own.
  const walk = (node: SamplingNode, site: Origin | undefined): void => {
    const origin = origins.of(node.callFrame);
    const own = origin.category === 'node' || origin.category === 'native' ? site : origin;
    if (node.selfSize > 0) {
      const at = own ?? origin;
      const entry = sites.get(at.label);
      if (entry === undefined) sites.set(at.label, { category: at.category, bytes: node.selfSize });
      else entry.bytes += node.selfSize;
      total += node.selfSize;
    }
    for (const child of node.children) walk(child, own);
  };
  walk(profile.head, undefined);
  return { total, sites };
}
