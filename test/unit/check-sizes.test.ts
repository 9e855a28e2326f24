/**
 * scripts/check-sizes.mjs (`npm run check:sizes`) over small source trees written to a temporary
 * directory: what it measures, what it lets pass, and how its list of known excesses may only
 * shrink. The checker's module is called in this process, with the arguments the command line
 * would pass, and once as the command itself.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { check as checkFormat, resolveConfig } from 'prettier';
import { afterEach, describe, expect, it } from 'vitest';

const CHECK = fileURLToPath(new URL('../../scripts/check-sizes.mjs', import.meta.url));
// The check is plain JavaScript run by node; the test loads the same module.
const { checkSizes } = (await import(CHECK)) as {
  checkSizes: (
    argv: readonly string[],
    print: { out: (line: string) => void; err: (line: string) => void },
  ) => number;
};

interface Entry {
  readonly path: string;
  readonly what: 'file' | 'class' | 'method' | 'function';
  readonly name: string;
  readonly lines: number;
}

interface Run {
  readonly code: number;
  readonly out: string;
}

const dirs: string[] = [];

afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A project root holding the given files (path -> text) and, if given, a list of known excesses. */
function tree(files: Record<string, string>, listed?: readonly Entry[]): string {
  const root = mkdtempSync(join(tmpdir(), 'latchkey-sizes-'));
  dirs.push(root);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  if (listed !== undefined) {
    mkdirSync(join(root, 'scripts'));
    writeFileSync(listPath(root), JSON.stringify({ excesses: listed }, null, 2));
  }
  return root;
}

const listPath = (root: string): string => join(root, 'scripts', 'size-limits.json');

function listed(root: string): Entry[] {
  return (JSON.parse(readFileSync(listPath(root), 'utf8')) as { excesses: Entry[] }).excesses;
}

function check(root: string, ...args: string[]): Run {
  const lines: string[] = [];
  const print = (line: string): void => void lines.push(line);
  const code = checkSizes(['--root', root, ...args], { out: print, err: print });
  return { code, out: lines.join('\n') };
}

/** `n` lines of statements, each indented by `indent` spaces. */
const body = (n: number, indent = 2): string => `${' '.repeat(indent)}count += 1;\n`.repeat(n);

/** A function declaration of exactly `lines` lines, from `function` to its closing brace. */
const fn = (name: string, lines: number): string =>
  `export function ${name}(): void {\n${body(lines - 2)}}\n`;

/** A file of exactly `lines` lines: `code`, padded with comment lines after it. */
function file(lines: number, code = ''): string {
  const used = code === '' ? 0 : code.split('\n').length - 1;
  return `${code}${'// filler\n'.repeat(lines - used)}`;
}

describe('check-sizes', () => {
  it('passes a tree within every limit, functions of exactly 60 lines and files of exactly 300 included', () => {
    const code = `let count = 0;\n${fn('settle', 60)}`;
    const root = tree({
      'src/engine/settle.ts': file(300, code),
      'src/primitives/lock/lock.ts': file(20),
      'src/client.ts': file(250),
    });
    const run = check(root);
    expect(run.out).toContain('0 excesses');
    expect(run.code).toBe(0);
  });

  it('finds a file over 300 lines, in a folder at any depth', () => {
    const root = tree({ 'src/primitives/latch/parts/wait.ts': file(301) });
    const run = check(root);
    expect(run.out).toContain(
      'src/primitives/latch/parts/wait.ts:1  file wait.ts is 301 lines (limit 300)  [new',
    );
    expect(run.out).toContain('1 excesses');
    expect(run.code).toBe(1);
  });

  it('finds a class over 250 lines, from its decorators to its closing brace', () => {
    const code = [
      'let count = 0;',
      '/** Doc comments do not count. */',
      '@sealed',
      'export class Registry {',
      '  tally(): void {',
      body(246, 4).trimEnd(),
      '  }',
      '}',
      '',
    ].join('\n');
    const root = tree({ 'src/engine/registry.ts': code });
    const run = check(root);
    expect(run.out).toContain('src/engine/registry.ts:3  class Registry is 251 lines (limit 250)  [new');
    expect(run.out).toContain(
      'src/engine/registry.ts:5  method Registry.tally is 248 lines (limit 60)  [new',
    );
    expect(run.code).toBe(1);
  });

  it('finds every kind of function over 60 lines: declarations, methods, and named arrows and expressions', () => {
    const lines = (n: number): string => body(n - 2, 4);
    const code = [
      'let count = 0;',
      fn('settle', 61).trimEnd(),
      'export const renew = async (): Promise<void> => {',
      lines(62).trimEnd(),
      '};',
      'export class Watchdog {',
      '  constructor() {',
      lines(63).trimEnd(),
      '  }',
      '  #onTick = function (): void {',
      lines(64).trimEnd(),
      '  };',
      '  get due(): number {',
      lines(64).trimEnd(),
      '    return count;',
      '  }',
      '}',
      'export const handlers = {',
      '  onMessage: (): void => {',
      lines(66).trimEnd(),
      '  },',
      '  onClose(): void {',
      lines(67).trimEnd(),
      '  },',
      '};',
      'setTimeout(() => {',
      lines(70).trimEnd(),
      '});',
      '',
    ].join('\n');
    const root = tree({ 'src/redlock/rounds.ts': code });
    const run = check(root);
    const at = (line: number, what: string, lines: number): string =>
      `src/redlock/rounds.ts:${String(line)}  ${what} is ${String(lines)} lines (limit 60)  [new`;
    let line = 2;
    expect(run.out).toContain(at(line, 'function settle', 61));
    expect(run.out).toContain(at((line += 61), 'function renew', 62));
    expect(run.out).toContain(at((line += 62 + 1), 'method Watchdog.constructor', 63));
    expect(run.out).toContain(at((line += 63), 'method Watchdog.#onTick', 64));
    expect(run.out).toContain(at((line += 64), 'method Watchdog.get due', 65));
    expect(run.out).toContain(at((line += 65 + 2), 'function handlers.onMessage', 66));
    expect(run.out).toContain(at((line += 66), 'function handlers.onClose', 67));
    // An inline callback counts as part of the code around it, here the module: it is not a room.
    expect(run.out).not.toContain('is 70 lines');
    expect(run.out).toContain('8 excesses (1 file, 0 class, 3 method, 4 function)');
    expect(run.code).toBe(1);
  });

  it('holds src/client.ts to 250 lines and measures nothing else outside the three folders', () => {
    const root = tree({
      'src/client.ts': file(251, `let count = 0;\n${fn('connect', 70)}`),
      'src/cli/main.ts': file(400, `let count = 0;\n${fn('main', 80)}`),
    });
    const run = check(root);
    expect(run.out).toContain('src/client.ts:1  file client.ts is 251 lines (limit 250)  [new');
    expect(run.out).not.toContain('connect');
    expect(run.out).not.toContain('src/cli/');
    expect(run.out).toContain('1 excesses');
    expect(run.code).toBe(1);
  });

  it('excepts the telemetry module from the file limit only', () => {
    const root = tree({ 'src/engine/telemetry.ts': file(400, `let count = 0;\n${fn('record', 61)}`) });
    const run = check(root);
    expect(run.out).not.toContain('file telemetry.ts');
    expect(run.out).toContain('src/engine/telemetry.ts:2  function record is 61 lines (limit 60)  [new');
    expect(run.code).toBe(1);
  });

  it('passes a listed excess of the size it is listed at', () => {
    const root = tree({ 'src/engine/acquire.ts': file(320) }, [
      { path: 'src/engine/acquire.ts', what: 'file', name: 'acquire.ts', lines: 320 },
    ]);
    const run = check(root);
    expect(run.out).toContain('src/engine/acquire.ts:1  file acquire.ts is 320 lines (limit 300)  [listed]');
    expect(run.out).toContain('1 excesses (1 file, 0 class, 0 method, 0 function): 1 listed, 0 new');
    expect(run.code).toBe(0);
  });

  it('fails on a listed excess that grew, and --update does not record the growth', () => {
    const code = `let count = 0;\n${fn('attempt', 90)}`;
    const entry: Entry = { path: 'src/engine/acquire.ts', what: 'function', name: 'attempt', lines: 80 };
    const root = tree({ 'src/engine/acquire.ts': code }, [entry]);
    const run = check(root);
    expect(run.out).toContain(
      'src/engine/acquire.ts:2  function attempt is 90 lines (limit 60)  [grew: listed at 80]',
    );
    expect(run.code).toBe(1);
    const update = check(root, '--update');
    expect(update.code).toBe(1);
    expect(listed(root)).toEqual([entry]);
  });

  it('fails on a listed excess that shrank, prints the entry to lower, and --update lowers it', () => {
    const code = `let count = 0;\n${fn('attempt', 70)}`;
    const entry: Entry = { path: 'src/engine/acquire.ts', what: 'function', name: 'attempt', lines: 80 };
    const root = tree({ 'src/engine/acquire.ts': code }, [entry]);
    const run = check(root);
    expect(run.out).toContain('src/engine/acquire.ts:2  function attempt is 70 lines (limit 60)  [shrank');
    expect(run.out).toContain(
      'lower: { "path": "src/engine/acquire.ts", "what": "function", "name": "attempt", "lines": 80 }  ->  "lines": 70',
    );
    expect(run.code).toBe(1);
    expect(check(root, '--update').code).toBe(0);
    expect(listed(root)).toEqual([{ ...entry, lines: 70 }]);
    expect(check(root).code).toBe(0);
  });

  it('fails on a listed excess that is gone, prints the entry to remove, and --update drops it', () => {
    const kept: Entry = { path: 'src/engine/holds.ts', what: 'file', name: 'holds.ts', lines: 310 };
    const gone: Entry = { path: 'src/engine/holds.ts', what: 'class', name: 'Holds', lines: 260 };
    const root = tree({ 'src/engine/holds.ts': file(310, 'export class Holds {}\n') }, [kept, gone]);
    const run = check(root);
    expect(run.out).toContain(
      'remove: { "path": "src/engine/holds.ts", "what": "class", "name": "Holds", "lines": 260 }',
    );
    expect(run.out).toContain('1 listed gone');
    expect(run.code).toBe(1);
    expect(check(root, '--update').code).toBe(0);
    expect(listed(root)).toEqual([kept]);
  });

  it('records a new excess only with --accept, in a list Prettier leaves as it is', async () => {
    const root = tree({ 'src/engine/engine.ts': file(305, `let count = 0;\n${fn('open', 61)}`) }, []);
    expect(check(root, '--update').code).toBe(1);
    expect(listed(root)).toEqual([]);
    const accept = check(root, '--accept');
    expect(accept.code).toBe(0);
    expect(listed(root)).toEqual([
      { path: 'src/engine/engine.ts', what: 'file', name: 'engine.ts', lines: 305 },
      { path: 'src/engine/engine.ts', what: 'function', name: 'open', lines: 61 },
    ]);
    expect(check(root).code).toBe(0);
    const repoList = fileURLToPath(new URL('../../scripts/size-limits.json', import.meta.url));
    const config = { ...(await resolveConfig(repoList)), filepath: repoList };
    expect(await checkFormat(readFileSync(listPath(root), 'utf8'), config)).toBe(true);
  });

  it('treats a missing list as empty and refuses one it cannot read', () => {
    const root = tree({ 'src/engine/engine.ts': file(301) });
    expect(existsSync(listPath(root))).toBe(false);
    expect(check(root).out).toContain('[new');
    mkdirSync(join(root, 'scripts'));
    writeFileSync(listPath(root), JSON.stringify({ excesses: [{ path: 'src/engine/engine.ts' }] }));
    const run = check(root);
    expect(run.out).toContain('expected { "excesses"');
    expect(run.code).toBe(2);
  });

  it('runs as a command: exit code 1 and the findings on stdout when the tree breaks a limit', () => {
    const root = tree({ 'src/engine/engine.ts': file(301) }, []);
    const run = spawnSync(process.execPath, [CHECK, '--root', root], { encoding: 'utf8' });
    expect(run.stdout).toContain('src/engine/engine.ts:1  file engine.ts is 301 lines (limit 300)  [new');
    expect(run.stdout).toContain('check-sizes: FAILED');
    expect(run.status).toBe(1);
  });
});
