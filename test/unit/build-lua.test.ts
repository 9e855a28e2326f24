import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { luaScripts } from '../../src/scripts/generated.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
// The build step is plain JavaScript run by node; the test loads the same module.
const { checkScript, expandIncludes } = (await import(join(root, 'scripts', 'build-lua.mjs'))) as {
  checkScript: (name: string, source: string) => { numberOfKeys: number | null; sha1: string };
  expandIncludes: (source: string, read: (name: string) => string, from?: string) => string;
};
const readInclude = (name: string): string =>
  readFileSync(join(root, 'lua-scripts', 'include', `${name}.lua`), 'utf8');

const HEADER = [
  '-- Does one thing.',
  '-- KEYS[1] lock key',
  '-- KEYS[2] unlock channel',
  '-- ARGV[1] owner field',
  '-- Returns 1.',
].join('\n');

describe('build-lua contract check', () => {
  it('accepts a script whose header and body agree', () => {
    const body = 'local lockKey = KEYS[1]\nlocal channel = KEYS[2]\nlocal owner = ARGV[1]\nreturn 1\n';
    expect(checkScript('ok', `${HEADER}\n${body}`).numberOfKeys).toBe(2);
  });

  it('refuses a body that uses a key the header does not declare', () => {
    const body =
      'local lockKey = KEYS[1]\nlocal channel = KEYS[2]\nlocal extra = KEYS[3]\nlocal owner = ARGV[1]\nreturn 1\n';
    expect(() => checkScript('extra-key', `${HEADER}\n${body}`)).toThrow(/KEYS\[3\]/);
  });

  it('refuses a header that declares a key the body never uses', () => {
    const body = 'local lockKey = KEYS[1]\nlocal owner = ARGV[1]\nreturn 1\n';
    expect(() => checkScript('missing-key', `${HEADER}\n${body}`)).toThrow(/KEYS\[2\]/);
  });

  it('refuses a script without a purpose line or a Returns line', () => {
    const body = 'local lockKey = KEYS[1]\nreturn 1\n';
    expect(() => checkScript('bare', `-- KEYS[1] lock key\n${body}`)).toThrow(/open with one line/);
    expect(() => checkScript('no-returns', `-- Purpose.\n-- KEYS[1] lock key\n${body}`)).toThrow(/returns/);
  });

  it('refuses an undeclared ARGV', () => {
    const body =
      'local lockKey = KEYS[1]\nlocal channel = KEYS[2]\nlocal owner = ARGV[1]\nlocal x = ARGV[2]\n';
    expect(() => checkScript('argv', `${HEADER}\n${body}`)).toThrow(/ARGV\[2\]/);
  });

  it('pulls `-- @include <name>` lines in, and refuses an include that touches KEYS or ARGV', () => {
    const included = 'local function twice(x)\n  return x * 2\nend\n';
    const source = `${HEADER}\nlocal lockKey = KEYS[1]\n-- @include twice\nreturn twice(1)\n`;
    const expanded = expandIncludes(source, (name) => (name === 'twice' ? included : ''));
    expect(expanded).toContain('local function twice(x)');
    expect(expanded).not.toContain('@include');
    expect(() => expandIncludes(source, () => 'local k = KEYS[1]\n')).toThrow(/must not use KEYS or ARGV/);
  });

  it('pulls nested includes in once each, in order, and refuses a cycle or a missing include', () => {
    const files: Record<string, string> = {
      base: 'local function base()\n  return 1\nend\n',
      middle: '-- @include base\nlocal function middle()\n  return base() + 1\nend\n',
      other: '-- @include base\nlocal function other()\n  return base() + 2\nend\n',
      loop: '-- @include loop-back\n',
      'loop-back': '-- @include loop\n',
    };
    const read = (name: string): string => {
      const text = files[name];
      if (text === undefined) throw new Error('no such file');
      return text;
    };
    const expanded = expandIncludes(`${HEADER}\n-- @include middle\n-- @include other\nreturn 1\n`, read);
    expect(expanded.match(/local function base\(\)/g)).toHaveLength(1);
    expect(expanded.indexOf('function base')).toBeLessThan(expanded.indexOf('function middle'));
    expect(expanded.indexOf('function middle')).toBeLessThan(expanded.indexOf('function other'));
    expect(expanded).not.toContain('@include');
    expect(() => expandIncludes('-- @include loop\n', read)).toThrow(
      /includes itself: loop -> loop-back -> loop/,
    );
    expect(() => expandIncludes('-- @include missing\n', read, 'lua-scripts/x/y.lua')).toThrow(
      /lua-scripts\/x\/y\.lua includes "missing"/,
    );
  });

  it('embeds every script in lua-scripts/ with its SHA-1, and fails the build on a bad one', () => {
    const kinds = readdirSync(join(root, 'lua-scripts'), { withFileTypes: true })
      .filter((entry) => entry.isDirectory() && entry.name !== 'include')
      .map((entry) => entry.name);
    expect(kinds).toEqual(expect.arrayContaining(['lock', 'fenced-lock', 'simple-lock']));
    const files = kinds.flatMap((kind) =>
      readdirSync(join(root, 'lua-scripts', kind))
        .filter((f) => f.endsWith('.lua'))
        .map((f) => `${kind}/${f.replace(/\.lua$/, '')}`),
    );
    expect(Object.keys(luaScripts).sort()).toEqual(files.sort());
    for (const file of files) {
      const source = expandIncludes(
        readFileSync(join(root, 'lua-scripts', `${file}.lua`), 'utf8'),
        readInclude,
      );
      const name = file as keyof typeof luaScripts;
      expect(luaScripts[name].source).toBe(source);
      expect(checkScript(name, source).sha1).toBe(luaScripts[name].sha1);
    }
    // The real build step, run as npm runs it, succeeds on the project's scripts.
    expect(
      execFileSync(process.execPath, [join(root, 'scripts', 'build-lua.mjs')], { encoding: 'utf8' }),
    ).toMatch(/embedded \d+ Lua scripts/);
  });
});
