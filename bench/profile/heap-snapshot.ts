// Reads V8 heap snapshots (.heapsnapshot, the JSON `v8.writeHeapSnapshot` writes) and compares
// two of one process: the objects present in the second and not the first (V8 keeps an object's
// id from one snapshot to the next), and those gone, grouped by type — an object's constructor,
// a closure's function name, or the kind of V8 internal (strings, contexts, arrays behind
// objects and Maps) — with what holds them.
import { readFileSync } from 'node:fs';

interface SnapshotFile {
  readonly snapshot: {
    readonly meta: {
      readonly node_fields: readonly string[];
      readonly node_types: readonly [readonly string[], ...unknown[]];
      readonly edge_fields: readonly string[];
      readonly edge_types: readonly [readonly string[], ...unknown[]];
    };
    readonly node_count: number;
  };
  readonly nodes: readonly number[];
  readonly edges: readonly number[];
  readonly strings: readonly string[];
}

/** One snapshot, in arrays indexed by node (0..nodeCount-1) and by edge. */
export interface HeapGraph {
  readonly nodeCount: number;
  readonly nodeType: readonly string[];
  readonly type: Uint8Array;
  readonly name: Uint32Array;
  readonly id: Uint32Array;
  readonly selfSize: Float64Array;
  /** Edges of node i: firstEdge[i] .. firstEdge[i + 1] - 1. */
  readonly firstEdge: Uint32Array;
  readonly edgeType: readonly string[];
  readonly edgeKind: Uint8Array;
  readonly edgeName: Uint32Array;
  readonly edgeTo: Uint32Array;
  readonly strings: readonly string[];
}

function field(fields: readonly string[], name: string): number {
  const at = fields.indexOf(name);
  if (at === -1) throw new Error(`heap snapshot without the ${name} field`);
  return at;
}

export function readHeapSnapshot(path: string): HeapGraph {
  const file = JSON.parse(readFileSync(path, 'utf8')) as SnapshotFile;
  const { meta } = file.snapshot;
  const nf = meta.node_fields.length;
  const ef = meta.edge_fields.length;
  const nodeCount = file.nodes.length / nf;
  const n = (name: string): number => field(meta.node_fields, name);
  const [typeAt, nameAt, idAt, sizeAt, edgesAt] = [
    n('type'),
    n('name'),
    n('id'),
    n('self_size'),
    n('edge_count'),
  ];
  const e = (name: string): number => field(meta.edge_fields, name);
  const [edgeTypeAt, edgeNameAt, edgeToAt] = [e('type'), e('name_or_index'), e('to_node')];
  const graph = {
    nodeCount,
    nodeType: meta.node_types[0],
    type: new Uint8Array(nodeCount),
    name: new Uint32Array(nodeCount),
    id: new Uint32Array(nodeCount),
    selfSize: new Float64Array(nodeCount),
    firstEdge: new Uint32Array(nodeCount + 1),
    edgeType: meta.edge_types[0],
    edgeKind: new Uint8Array(file.edges.length / ef),
    edgeName: new Uint32Array(file.edges.length / ef),
    edgeTo: new Uint32Array(file.edges.length / ef),
    strings: file.strings,
  };
  let edge = 0;
  for (let i = 0; i < nodeCount; i += 1) {
    const base = i * nf;
    graph.type[i] = file.nodes[base + typeAt] ?? 0;
    graph.name[i] = file.nodes[base + nameAt] ?? 0;
    graph.id[i] = file.nodes[base + idAt] ?? 0;
    graph.selfSize[i] = file.nodes[base + sizeAt] ?? 0;
    graph.firstEdge[i] = edge;
    edge += file.nodes[base + edgesAt] ?? 0;
  }
  graph.firstEdge[nodeCount] = edge;
  for (let j = 0; j < graph.edgeTo.length; j += 1) {
    graph.edgeKind[j] = file.edges[j * ef + edgeTypeAt] ?? 0;
    graph.edgeName[j] = file.edges[j * ef + edgeNameAt] ?? 0;
    // to_node is an offset into the nodes array.
    graph.edgeTo[j] = (file.edges[j * ef + edgeToAt] ?? 0) / nf;
  }
  return graph;
}

/**
 * The type an object is counted under: its constructor for a JS object, `name()` for a
 * closure, and one name for each kind of V8 internal whose own name says nothing (a string's
 * is its text).
 */
export function typeOf(graph: HeapGraph, node: number): string {
  const kind = graph.nodeType[graph.type[node] ?? 0] ?? 'unknown';
  const name = graph.strings[graph.name[node] ?? 0] ?? '';
  switch (kind) {
    case 'object':
    case 'native':
    case 'hidden':
    case 'synthetic':
      return name === '' ? `(${kind})` : name;
    case 'closure':
      return `${name === '' ? '(anonymous)' : name}()`;
    case 'array':
      return `${name === '' ? '(array)' : name}`;
    case 'string':
      return '(string)';
    case 'concatenated string':
    case 'sliced string':
      return `(${kind})`;
    case 'number':
      return '(heap number)';
    case 'code':
      return '(code)';
    case 'object shape':
      return '(object shape)';
    default:
      return `(${kind})`;
  }
}

/** Bytes and objects of one group. */
export interface Tally {
  count: number;
  bytes: number;
}

/** How two snapshots of one process differ, grouped by type. */
export interface HeapDiff {
  /** Sum of every node's self size, in the first snapshot and in the second (bytes). */
  readonly totalBefore: number;
  readonly totalAfter: number;
  /** By type: objects of the second snapshot that the first did not have. */
  readonly added: ReadonlyMap<string, Tally>;
  /** By type: objects of the first snapshot gone from the second. */
  readonly gone: ReadonlyMap<string, Tally>;
  /** By type, then by what holds them (`Type.edge`): the added objects' bytes. */
  readonly heldBy: ReadonlyMap<string, ReadonlyMap<string, number>>;
}

function count(table: Map<string, Tally>, key: string, bytes: number): void {
  const tally = table.get(key) ?? { count: 0, bytes: 0 };
  tally.count += 1;
  tally.bytes += bytes;
  table.set(key, tally);
}

function add(table: Map<string, Map<string, number>>, key: string, sub: string, bytes: number): void {
  const inner = table.get(key) ?? new Map<string, number>();
  inner.set(sub, (inner.get(sub) ?? 0) + bytes);
  table.set(key, inner);
}

function total(graph: HeapGraph): number {
  let sum = 0;
  for (const size of graph.selfSize) sum += size;
  return sum;
}

/** An edge's name as a holder's field: `.name` for a property or variable, `[]` for an element. */
function edgeLabel(graph: HeapGraph, edge: number): string {
  const kind = graph.edgeType[graph.edgeKind[edge] ?? 0];
  const nameOrIndex = graph.edgeName[edge] ?? 0;
  const name = graph.strings[nameOrIndex] ?? '';
  if (kind === 'element' || kind === 'hidden' || /^\d+$/.test(name)) return '[]';
  return `.${name}`;
}

/** V8's containers behind an object (a Map's table, an array's elements): named by their holder. */
const CONTAINERS = new Set(['(array)', '(object elements)', '(object properties)']);

/**
 * For each node added since `isAdded` says so, its first holder by a strong edge: the holder's
 * type and the edge's name, e.g. `Waiter.#listener` or `system / Context.resolve`; a holder
 * that is one of V8's containers is named by its own holder, e.g. `Map.table[]`.
 */
function holders(graph: HeapGraph, isAdded: Uint8Array): string[] {
  const holder = new Int32Array(graph.nodeCount).fill(-1);
  const via = new Int32Array(graph.nodeCount).fill(-1);
  const weak = graph.edgeType.indexOf('weak');
  const shortcut = graph.edgeType.indexOf('shortcut');
  for (let from = 0; from < graph.nodeCount; from += 1) {
    for (let edge = graph.firstEdge[from] ?? 0; edge < (graph.firstEdge[from + 1] ?? 0); edge += 1) {
      const to = graph.edgeTo[edge] ?? 0;
      const kind = graph.edgeKind[edge];
      if ((holder[to] ?? 0) >= 0 || kind === weak || kind === shortcut) continue;
      holder[to] = from;
      via[to] = edge;
    }
  }
  const label = (node: number, depth: number): string => {
    const from = holder[node] ?? -1;
    if (from < 0) return '(no strong holder)';
    const type = typeOf(graph, from);
    const base =
      depth < 2 && CONTAINERS.has(type) && (holder[from] ?? -1) >= 0 ? label(from, depth + 1) : type;
    return `${base}${edgeLabel(graph, via[node] ?? 0)}`;
  };
  const held: string[] = new Array<string>(graph.nodeCount);
  for (let node = 0; node < graph.nodeCount; node += 1) if (isAdded[node] === 1) held[node] = label(node, 0);
  return held;
}

/** Compares two snapshots of one process. */
export function diffSnapshots(before: HeapGraph, after: HeapGraph): HeapDiff {
  const beforeIds = new Set<number>(before.id);
  const afterIds = new Set<number>(after.id);
  const added = new Map<string, Tally>();
  const gone = new Map<string, Tally>();
  const isAdded = new Uint8Array(after.nodeCount);
  for (let node = 0; node < after.nodeCount; node += 1) {
    if (beforeIds.has(after.id[node] ?? 0)) continue;
    isAdded[node] = 1;
    count(added, typeOf(after, node), after.selfSize[node] ?? 0);
  }
  for (let node = 0; node < before.nodeCount; node += 1) {
    if (!afterIds.has(before.id[node] ?? 0)) count(gone, typeOf(before, node), before.selfSize[node] ?? 0);
  }
  const held = holders(after, isAdded);
  const heldBy = new Map<string, Map<string, number>>();
  for (let node = 0; node < after.nodeCount; node += 1) {
    if (isAdded[node] === 1)
      add(heldBy, typeOf(after, node), held[node] ?? '(no strong holder)', after.selfSize[node] ?? 0);
  }
  return { totalBefore: total(before), totalAfter: total(after), added, gone, heldBy };
}
