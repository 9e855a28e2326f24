#!/usr/bin/env node
// Embeds lua-scripts/**/*.lua into src/scripts/generated.ts, so the library never reads a
// script from disk at run time, and refuses a script whose contract header and body disagree.
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, renameSync, writeFileSync, mkdirSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const scriptsDir = join(root, 'lua-scripts');
const outFile = join(root, 'src', 'scripts', 'generated.ts');
/** Shared Lua routines, pulled into scripts by `-- @include <name>` lines; never scripts themselves. */
const includeDir = join(scriptsDir, 'include');
const INCLUDE_LINE = /^-- @include ([a-z][a-z0-9-]*)$/gm;

function listLua(dir) {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((entry) => {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) return path === includeDir ? [] : listLua(path);
      return entry.name.endsWith('.lua') ? [path] : [];
    })
    .sort();
}

/**
 * Replaces every `-- @include <name>` line with lua-scripts/include/<name>.lua, read through
 * `read(name)`. Includes may include others, to any depth; each is pulled in once per script (at
 * its first mention, so a routine is defined before the code that follows it), and a cycle is
 * refused. Included files define local functions and never touch KEYS or ARGV: a script's keys
 * and arguments stay visible in its own body, where its header is checked against them.
 */
export function expandIncludes(source, read, from = 'the script') {
  const seen = new Set();
  const expand = (text, stack) =>
    text.replace(INCLUDE_LINE, (_line, name) => {
      if (stack.includes(name)) {
        throw new Error(`lua-scripts/include/${name}.lua includes itself: ${[...stack, name].join(' -> ')}`);
      }
      if (seen.has(name)) return '';
      seen.add(name);
      let included;
      try {
        included = read(name);
      } catch (error) {
        const requester = stack.length === 0 ? from : `lua-scripts/include/${stack.at(-1)}.lua`;
        throw new Error(`${requester} includes "${name}", which cannot be read: ${error.message}`);
      }
      if (/\b(KEYS|ARGV)\b/.test(included)) {
        throw new Error(`lua-scripts/include/${name}.lua must not use KEYS or ARGV; pass them as parameters`);
      }
      return expand(included, [...stack, name]).trimEnd();
    });
  return expand(source, []);
}

/** Returns the script's description, or throws with every disagreement found. */
export function checkScript(name, source) {
  const lines = source.split('\n');
  const header = [];
  for (const line of lines) {
    if (!line.startsWith('--')) break;
    header.push(line.replace(/^--\s?/, ''));
  }
  const body = lines.slice(header.length).join('\n');
  const problems = [];
  const purpose = header[0]?.trim() ?? '';
  if (purpose === '' || /^(KEYS|ARGV|Returns)/.test(purpose)) {
    problems.push('the header must open with one line saying what the script does');
  }
  if (!header.some((line) => line.startsWith('Returns'))) {
    problems.push('the header must say what the script returns (a line starting with "Returns")');
  }

  const declared = (kind) => {
    const numbered = new Set();
    let variadic = false;
    for (const line of header) {
      const match = new RegExp(`^${kind}\\[([^\\]]+)\\]`).exec(line);
      if (!match) continue;
      const index = match[1].trim();
      if (/^\d+$/.test(index)) numbered.add(Number(index));
      else variadic = true;
    }
    return { numbered, variadic };
  };
  const used = (kind) =>
    new Set([...body.matchAll(new RegExp(`${kind}\\[(\\d+)\\]`, 'g'))].map((m) => Number(m[1])));

  const keys = declared('KEYS');
  const usedKeys = used('KEYS');
  if (keys.variadic) {
    if (keys.numbered.size > 0) problems.push('KEYS is declared both numbered and variadic');
    if (!/#KEYS/.test(body)) problems.push('KEYS is declared variadic but the body never reads #KEYS');
    if (usedKeys.size > 0) problems.push('KEYS is declared variadic but the body indexes it by number');
  } else {
    const count = keys.numbered.size;
    for (let i = 1; i <= count; i += 1) {
      if (!keys.numbered.has(i)) problems.push(`the header skips KEYS[${i}]`);
    }
    for (const i of keys.numbered) {
      if (!usedKeys.has(i)) problems.push(`the header declares KEYS[${i}] but the body never uses it`);
    }
    for (const i of usedKeys) {
      if (!keys.numbered.has(i)) problems.push(`the body uses KEYS[${i}] but the header does not declare it`);
    }
  }
  const argv = declared('ARGV');
  for (const i of used('ARGV')) {
    if (!argv.numbered.has(i)) problems.push(`the body uses ARGV[${i}] but the header does not declare it`);
  }
  for (const i of argv.numbered) {
    if (!used('ARGV').has(i)) problems.push(`the header declares ARGV[${i}] but the body never uses it`);
  }
  if (/\bKEYS\[[^\]]+\]/.test(body.replace(/local\s+\w+\s*=\s*KEYS\[\d+\]/g, '')) && !keys.variadic) {
    problems.push('give every KEYS entry a local name (`local lockKey = KEYS[1]`) and use that name');
  }
  if (problems.length > 0) {
    throw new Error(`lua-scripts/${name}.lua: ${problems.join('; ')}`);
  }
  return {
    name,
    purpose,
    numberOfKeys: keys.variadic ? null : keys.numbered.size,
    source,
    sha1: createHash('sha1').update(source).digest('hex'),
  };
}

const PUBLISH_CALL = /redis\.(p?call)\('publish',/g;
const NUMSUB_CALL = /redis\.(p?call)\('pubsub', 'numsub',/g;

/**
 * The script's twin for sharded pub/sub (Redis Cluster on Redis 7 or later): the same text with
 * every `redis.call('publish', …)` (and `pcall`) made `spublish`, so its messages stay on the
 * shard of the lock's slot, where SSUBSCRIBE listens, and every `PUBSUB NUMSUB` made
 * `PUBSUB SHARDNUMSUB`, which counts those listeners. Undefined for a script that publishes
 * nothing. The runner picks the twin when the connection says it uses sharded pub/sub.
 */
export function shardedTwin(source) {
  if (!PUBLISH_CALL.test(source)) return undefined;
  PUBLISH_CALL.lastIndex = 0;
  const twin = source
    .replace(PUBLISH_CALL, "redis.$1('spublish',")
    .replace(NUMSUB_CALL, "redis.$1('pubsub', 'shardnumsub',");
  return { sha1: createHash('sha1').update(twin).digest('hex'), source: twin };
}

function main() {
  const scripts = listLua(scriptsDir).map((path) => {
    const name = relative(scriptsDir, path)
      .split(sep)
      .join('/')
      .replace(/\.lua$/, '');
    const source = expandIncludes(
      readFileSync(path, 'utf8'),
      (include) => readFileSync(join(includeDir, `${include}.lua`), 'utf8'),
      `lua-scripts/${name}.lua`,
    );
    return checkScript(name, source);
  });
  const sharded = (source) => {
    const twin = shardedTwin(source);
    if (twin === undefined) return '';
    return `    sharded: { sha1: ${JSON.stringify(twin.sha1)}, source: ${JSON.stringify(twin.source)} },\n`;
  };
  const entries = scripts
    .map(
      (s) =>
        `  ${JSON.stringify(s.name)}: {\n` +
        `    name: ${JSON.stringify(s.name)},\n` +
        `    numberOfKeys: ${s.numberOfKeys === null ? 'null' : s.numberOfKeys},\n` +
        `    sha1: ${JSON.stringify(s.sha1)},\n` +
        `    source: ${JSON.stringify(s.source)},\n` +
        sharded(s.source) +
        `  },`,
    )
    .join('\n');
  const out =
    `// Generated by scripts/build-lua.mjs from lua-scripts/. Do not edit; run \`npm run build:lua\`.\n` +
    `import type { LuaScript } from './script.js';\n\n` +
    `/** @internal */\n` +
    `export const luaScripts = {\n${entries}\n} as const satisfies Record<string, LuaScript>;\n`;
  // Rewritten only when it changed, and then by rename: `npm pack` (run by a test) rebuilds the
  // table while other test processes may be importing it, and must never show them half a file.
  if (existsSync(outFile) && readFileSync(outFile, 'utf8') === out) {
    console.log(
      `embedded ${scripts.length} Lua scripts into ${relative(root, outFile)} (already up to date)`,
    );
    return;
  }
  mkdirSync(dirname(outFile), { recursive: true });
  const partial = `${outFile}.${process.pid}.tmp`;
  writeFileSync(partial, out);
  renameSync(partial, outFile);
  console.log(`embedded ${scripts.length} Lua scripts into ${relative(root, outFile)}`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  try {
    main();
  } catch (error) {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  }
}
