// Whose code a function of a CPU profile or of an allocation stack is: latchkey's (its built
// bundle, named back to its sources by the bundle's source map), node-redis's, latchkey's
// dependencies', the benchmark's, Node's own; and the pseudo-functions V8 samples outside
// JavaScript (native code, GC, idle).
import { existsSync, readFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Where time or heap goes, in the order the report lists them. */
export const CATEGORIES = [
  'latchkey',
  'latchkey deps',
  'node-redis',
  'bench',
  'node',
  'native',
  'GC',
  'idle',
] as const;

export type Category = (typeof CATEGORIES)[number];

/** What each category holds, for the report. */
export const CATEGORY_MEANING: Readonly<Record<Category, string>> = {
  latchkey: "latchkey's built bundle (dist/index.js), named by its source map",
  'latchkey deps': "latchkey's dependencies (eventemitter3, p-retry)",
  'node-redis': 'node-redis (@redis/client, redis)',
  bench:
    "the harness and a floor's own client code (bench/, and the src/ modules a floor imports through tsx)",
  node: "Node's own JavaScript (node:*), V8's builtins and Node's native bindings (the socket write)",
  native: 'native code outside JavaScript: sockets and libuv, the inspector (V8 "(program)")',
  GC: 'garbage collection',
  idle: 'the event loop waiting (for Redis, the other process, a timer)',
};

/** A function's category and a label that names it: `name (file:line)`. */
export interface Origin {
  readonly category: Category;
  readonly label: string;
}

/** A position in a script: line and column 0-based, as a CPU profile gives them. */
export interface Frame {
  readonly functionName: string;
  readonly url: string;
  readonly lineNumber: number;
  readonly columnNumber: number;
}

const PSEUDO: ReadonlyMap<string, Category> = new Map([
  ['(idle)', 'idle'],
  ['(garbage collector)', 'GC'],
  ['(program)', 'native'],
  ['(root)', 'native'],
]);

/** Classifies frames; one per run, as it keeps latchkey's source map and what it has named. */
export class Origins {
  readonly #rootDir: string;
  readonly #bundle: string;
  readonly #map: SourceMap | undefined;
  readonly #named = new Map<string, Origin>();

  constructor(rootDir: string) {
    this.#rootDir = rootDir;
    this.#bundle = join(rootDir, 'dist', 'index.js');
    const mapFile = `${this.#bundle}.map`;
    this.#map = existsSync(mapFile)
      ? new SourceMap(JSON.parse(readFileSync(mapFile, 'utf8')) as ConstructorParameters<typeof SourceMap>[0])
      : undefined;
  }

  /** The origin of a frame; memoised, as a profile names the same functions many times. */
  of(frame: Frame): Origin {
    const key = `${frame.functionName}\u0000${frame.url}\u0000${frame.lineNumber}\u0000${frame.columnNumber}`;
    let origin = this.#named.get(key);
    if (origin === undefined) {
      origin = this.#classify(frame);
      this.#named.set(key, origin);
    }
    return origin;
  }

  #classify(frame: Frame): Origin {
    const name = frame.functionName === '' ? '(anonymous)' : frame.functionName;
    const pseudo = PSEUDO.get(frame.functionName);
    if (pseudo !== undefined && frame.url === '') return { category: pseudo, label: frame.functionName };
    const path = frame.url.startsWith('file://') ? fileURLToPath(frame.url) : frame.url;
    if (path === '') return { category: 'node', label: `${name} (builtin or native binding)` };
    if (path.startsWith('node:') || !path.startsWith('/'))
      return { category: 'node', label: `${name} (${path}:${frame.lineNumber + 1})` };
    if (path === this.#bundle) return { category: 'latchkey', label: this.#source(name, frame) };
    const modules = path.lastIndexOf('/node_modules/');
    if (modules !== -1) {
      const inside = path.slice(modules + '/node_modules/'.length);
      const at = `${name} (${inside}:${frame.lineNumber + 1})`;
      if (inside.startsWith('@redis/') || inside.startsWith('redis/'))
        return { category: 'node-redis', label: at };
      if (inside.startsWith('eventemitter3/') || inside.startsWith('p-retry/'))
        return { category: 'latchkey deps', label: at };
      return { category: 'bench', label: at };
    }
    // tsx compiles the benchmark's TypeScript on load; V8 places its functions on line 1.
    const line = frame.lineNumber > 0 ? `:${frame.lineNumber + 1}` : '';
    return { category: 'bench', label: `${name} (${relative(this.#rootDir, path)}${line})` };
  }

  /** `name (src/…/file.ts:line)` of a function of latchkey's bundle, by its source map. */
  #source(name: string, frame: Frame): string {
    const entry = this.#map?.findEntry(frame.lineNumber, Math.max(0, frame.columnNumber));
    if (entry === undefined || !('originalSource' in entry))
      return `${name} (dist/index.js:${frame.lineNumber + 1})`;
    const source = entry.originalSource.replace(/^(\.\.\/)+/, '');
    return `${name} (${source}:${entry.originalLine + 1})`;
  }
}
