#!/usr/bin/env node
// Keeps the rooms of the source tree small enough to read (STYLE.md 4c).
//
//   node scripts/check-sizes.mjs             (npm run check:sizes; part of npm test)
//   node scripts/check-sizes.mjs --update    lowers or drops entries of the list; never adds one
//   node scripts/check-sizes.mjs --accept    records the tree as it is, new excesses included
//
// Limits, in src/engine, src/primitives and src/redlock and every folder below them:
//   a class at most 250 lines, a function or method at most 60, a file at most 300.
// A class, function or method is measured from the line of its declaration (its decorators and
// modifiers included, its doc comment not) to its closing brace. Methods, constructors and
// accessors count, and so do arrow functions and function expressions given a name: by a
// variable, a class field, an object literal's property or an assignment. A callback passed
// inline counts as part of the function around it. src/client.ts may have at most 250 lines.
// Excepted by rule: the generated script table (src/scripts/generated.ts, outside the folders
// above in any case) entirely, and src/engine/telemetry.ts from the file limit only.
//
// scripts/size-limits.json lists the excesses the tree is known to have (path, what, name and
// lines). Its entries may only shrink. The check fails on an excess the list does not hold, on a
// listed one that grew, and on a listed one that is now smaller or gone, so that the list follows
// the code down; for those it prints the entry to lower or remove (--update does it). Only
// --accept records a new excess or a larger one. The TypeScript compiler's parser finds the
// classes and functions.
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const LIMITS = { file: 300, class: 250, function: 60, method: 60 };
const SCANNED_DIRS = ['src/engine', 'src/primitives', 'src/redlock'];
/** Files outside SCANNED_DIRS held to a file limit of their own; their functions are not measured. */
const FILE_ONLY = { 'src/client.ts': 250 };
/** Path -> the kinds of limit it is excepted from. */
const EXCEPTED = {
  'src/scripts/generated.ts': ['file', 'class', 'function', 'method'],
  'src/engine/telemetry.ts': ['file'],
};
const LIST_NOTE =
  'Known excesses of the size limits, which may only shrink: see scripts/check-sizes.mjs. ' +
  'Regenerate with `npm run check:sizes -- --update` (lowers and drops) or `-- --accept` (records new ones).';
const KIND_ORDER = ['file', 'class', 'method', 'function'];
const SOURCE_FILE = /\.(?:ts|tsx|mts|cts)$/;

/** A mistake in the arguments or the list file: the check cannot run (exit code 2). */
class UsageError extends Error {}

function usage(message) {
  throw new UsageError(
    `${message}\nusage: check-sizes.mjs [--update | --accept] [--root <dir>] [--list <file>]`,
  );
}

function parseArgs(argv) {
  const options = {
    root: join(dirname(fileURLToPath(import.meta.url)), '..'),
    list: undefined,
    update: false,
    accept: false,
  };
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i];
    if (arg === '--update') options.update = true;
    else if (arg === '--accept') options.accept = true;
    else if (arg === '--root' || arg === '--list') {
      const value = argv[i + 1];
      if (value === undefined) usage(`${arg} needs a value`);
      options[arg.slice(2)] = resolve(value);
      i += 1;
    } else usage(`unknown argument ${arg}`);
  }
  if (options.update && options.accept) usage('--update and --accept exclude each other');
  options.list ??= join(options.root, 'scripts', 'size-limits.json');
  return options;
}

function listSources(dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((entry) => {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) return listSources(path);
      return SOURCE_FILE.test(entry.name) && !entry.name.endsWith('.d.ts') ? [path] : [];
    })
    .sort();
}

/** Lines as `wc -l` counts them, plus a last line that lacks its newline. */
function countLines(text) {
  if (text.length === 0) return 0;
  const newlines = text.split('\n').length - 1;
  return text.endsWith('\n') ? newlines : newlines + 1;
}

function propertyName(name) {
  if (ts.isIdentifier(name) || ts.isPrivateIdentifier(name)) return name.text;
  if (ts.isStringLiteral(name) || ts.isNumericLiteral(name)) return name.text;
  if (ts.isComputedPropertyName(name)) return `[${name.expression.getText()}]`;
  return name.getText();
}

/** Steps out of parentheses, `as`, `satisfies` and `!` around an expression. */
function outerOf(node) {
  let outer = node.parent;
  let inner = node;
  while (
    outer !== undefined &&
    (ts.isParenthesizedExpression(outer) ||
      ts.isAsExpression(outer) ||
      ts.isSatisfiesExpression(outer) ||
      ts.isNonNullExpression(outer) ||
      ts.isTypeAssertionExpression(outer))
  ) {
    inner = outer;
    outer = outer.parent;
  }
  return { inner, outer };
}

/**
 * What gives a function or class expression its name: the declaration it is assigned by, with
 * the name and the node its lines count from; undefined when it is passed inline.
 */
function namedBy(node) {
  const { inner, outer } = outerOf(node);
  if (outer === undefined) return undefined;
  const named = (name, from, member = false) => ({ name, from, member });
  if (ts.isVariableDeclaration(outer) && outer.initializer === inner && ts.isIdentifier(outer.name)) {
    return named(outer.name.text, outer);
  }
  if (ts.isPropertyDeclaration(outer) && outer.initializer === inner) {
    return named(propertyName(outer.name), outer, true);
  }
  if (ts.isPropertyAssignment(outer) && outer.initializer === inner) {
    return named(propertyName(outer.name), outer);
  }
  if (
    ts.isBinaryExpression(outer) &&
    outer.right === inner &&
    outer.operatorToken.kind === ts.SyntaxKind.EqualsToken
  ) {
    return named(outer.left.getText().replace(/^this\./, ''), outer);
  }
  if (ts.isExportAssignment(outer)) return named('default', outer);
  return undefined;
}

function isFunctionLike(node) {
  return (
    ts.isFunctionDeclaration(node) ||
    ts.isMethodDeclaration(node) ||
    ts.isConstructorDeclaration(node) ||
    ts.isGetAccessorDeclaration(node) ||
    ts.isSetAccessorDeclaration(node) ||
    ts.isArrowFunction(node) ||
    ts.isFunctionExpression(node)
  );
}

/** The unit a node declares (class, function or method), or undefined if it declares none. */
function unitOf(node) {
  if (ts.isClassDeclaration(node) || ts.isClassExpression(node)) {
    if (ts.isClassDeclaration(node)) return { what: 'class', name: node.name?.text ?? 'default', from: node };
    const by = namedBy(node);
    return {
      what: 'class',
      name: node.name?.text ?? by?.name ?? '(anonymous class)',
      from: by?.from ?? node,
    };
  }
  if (!isFunctionLike(node) || node.body === undefined) return undefined;
  if (ts.isFunctionDeclaration(node))
    return { what: 'function', name: node.name?.text ?? 'default', from: node };
  if (ts.isConstructorDeclaration(node)) return { what: 'method', name: 'constructor', from: node };
  if (
    ts.isMethodDeclaration(node) ||
    ts.isGetAccessorDeclaration(node) ||
    ts.isSetAccessorDeclaration(node)
  ) {
    const prefix = ts.isGetAccessorDeclaration(node)
      ? 'get '
      : ts.isSetAccessorDeclaration(node)
        ? 'set '
        : '';
    const inClass = ts.isClassLike(node.parent);
    return { what: inClass ? 'method' : 'function', name: prefix + propertyName(node.name), from: node };
  }
  const by = namedBy(node);
  if (by === undefined) return undefined;
  return { what: by.member ? 'method' : 'function', name: by.name, from: by.from };
}

/** The name of an object literal that is itself assigned a name, as in `const handlers = { ... }`. */
function objectName(node) {
  if (!ts.isObjectLiteralExpression(node)) return undefined;
  return namedBy(node)?.name;
}

/** `Outer.inner` names: the classes, named functions and named object literals around a unit. */
function qualify(node, name) {
  const names = [name];
  for (let up = node.parent; up !== undefined; up = up.parent) {
    const outer = unitOf(up)?.name ?? objectName(up);
    if (outer !== undefined) names.unshift(outer);
  }
  return names.join('.');
}

function measureFile(root, path) {
  const rel = relative(root, path).split(sep).join('/');
  const text = readFileSync(path, 'utf8');
  const lineCount = countLines(text);
  const excepted = EXCEPTED[rel] ?? [];
  const found = [];
  const fileLimit = FILE_ONLY[rel] ?? LIMITS.file;
  if (!excepted.includes('file') && lineCount > fileLimit) {
    found.push({ path: rel, line: 1, what: 'file', name: basename(rel), lines: lineCount, limit: fileLimit });
  }
  if (FILE_ONLY[rel] !== undefined) return found;
  const kind = path.endsWith('.tsx') ? ts.ScriptKind.TSX : ts.ScriptKind.TS;
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true, kind);
  const lineOf = (pos) => source.getLineAndCharacterOfPosition(pos).line + 1;
  const seen = new Map();
  const visit = (node) => {
    const unit = unitOf(node);
    if (unit !== undefined && !excepted.includes(unit.what)) {
      const first = lineOf(unit.from.getStart(source));
      const lines = lineOf(node.getEnd()) - first + 1;
      let name = qualify(unit.from, unit.name);
      const key = `${unit.what} ${name}`;
      const count = (seen.get(key) ?? 0) + 1;
      seen.set(key, count);
      if (count > 1) name = `${name} #${count}`;
      const limit = LIMITS[unit.what];
      if (lines > limit) found.push({ path: rel, line: first, what: unit.what, name, lines, limit });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

function measure(root) {
  const files = [
    ...SCANNED_DIRS.flatMap((dir) => listSources(join(root, dir))),
    ...Object.keys(FILE_ONLY)
      .map((rel) => join(root, rel))
      .filter((path) => existsSync(path)),
  ];
  return files.flatMap((path) => measureFile(root, path));
}

const keyOf = (entry) => `${entry.path}\0${entry.what}\0${entry.name}`;
/** Code-point order, so that the list comes out the same whatever the machine's locale. */
const compareText = (a, b) => (a < b ? -1 : a > b ? 1 : 0);
const byPlace = (a, b) =>
  compareText(a.path, b.path) ||
  KIND_ORDER.indexOf(a.what) - KIND_ORDER.indexOf(b.what) ||
  compareText(a.name, b.name);

function readList(file) {
  if (!existsSync(file)) return [];
  const parsed = JSON.parse(readFileSync(file, 'utf8'));
  const entries = parsed.excesses;
  const valid = (e) =>
    typeof e === 'object' &&
    e !== null &&
    typeof e.path === 'string' &&
    KIND_ORDER.includes(e.what) &&
    typeof e.name === 'string' &&
    Number.isInteger(e.lines);
  if (!Array.isArray(entries) || !entries.every(valid)) {
    throw new UsageError(`${file}: expected { "excesses": [{ "path", "what", "name", "lines" }, ...] }`);
  }
  return entries;
}

function entryText(entry) {
  const { path, what, name, lines } = entry;
  const [p, w, n] = [path, what, name].map((value) => JSON.stringify(value));
  return `{ "path": ${p}, "what": ${w}, "name": ${n}, "lines": ${String(lines)} }`;
}

/** Writes the list as Prettier would format it: one entry a line where it fits. */
function writeList(file, entries) {
  const lines = [...entries].sort(byPlace).map((entry) => {
    const oneLine = `    ${entryText(entry)}`;
    if (oneLine.length <= 110) return oneLine;
    return [
      '    {',
      `      "path": ${JSON.stringify(entry.path)},`,
      `      "what": ${JSON.stringify(entry.what)},`,
      `      "name": ${JSON.stringify(entry.name)},`,
      `      "lines": ${String(entry.lines)}`,
      '    }',
    ].join('\n');
  });
  const body = lines.length === 0 ? '[]' : `[\n${lines.join(',\n')}\n  ]`;
  writeFileSync(file, `{\n  "note": ${JSON.stringify(LIST_NOTE)},\n  "excesses": ${body}\n}\n`);
}

function compare(found, listed) {
  const listedByKey = new Map(listed.map((entry) => [keyOf(entry), entry]));
  const foundKeys = new Set(found.map(keyOf));
  const rows = found.map((finding) => {
    const entry = listedByKey.get(keyOf(finding));
    if (entry === undefined) return { finding, status: 'new' };
    if (finding.lines > entry.lines) return { finding, entry, status: 'grew' };
    if (finding.lines < entry.lines) return { finding, entry, status: 'shrank' };
    return { finding, entry, status: 'listed' };
  });
  const gone = listed.filter((entry) => !foundKeys.has(keyOf(entry)));
  return { rows, gone };
}

function describe(finding) {
  const { path, line, what, name, lines, limit } = finding;
  return `${path}:${String(line)}  ${what} ${name} is ${String(lines)} lines (limit ${String(limit)})`;
}

function report(rows, gone, listName, out) {
  const byLine = (a, b) => compareText(a.finding.path, b.finding.path) || a.finding.line - b.finding.line;
  for (const { finding, entry, status } of [...rows].sort(byLine)) {
    const text = describe(finding);
    if (status === 'listed') out(`${text}  [listed]`);
    else if (status === 'new') out(`${text}  [new: not in ${listName}]`);
    else if (status === 'grew') out(`${text}  [grew: listed at ${String(entry.lines)}]`);
    else {
      out(`${text}  [shrank: lower its entry in ${listName}]`);
      out(`    lower: ${entryText(entry)}  ->  "lines": ${String(finding.lines)}`);
    }
  }
  for (const entry of gone) {
    const was = `listed at ${String(entry.lines)} lines, now within its limit or gone`;
    out(`${entry.path}  ${entry.what} ${entry.name}  [${was}: remove its entry from ${listName}]`);
    out(`    remove: ${entryText(entry)}`);
  }
}

function summary(rows, gone) {
  const count = (status) => rows.filter((row) => row.status === status).length;
  const kinds = KIND_ORDER.map(
    (what) => `${String(rows.filter((r) => r.finding.what === what).length)} ${what}`,
  );
  const parts = ['listed', 'new', 'grew', 'shrank'].map((status) => `${String(count(status))} ${status}`);
  parts.push(`${String(gone.length)} listed gone`);
  return `check-sizes: ${String(rows.length)} excesses (${kinds.join(', ')}): ${parts.join(', ')}`;
}

/**
 * Runs the check with command-line arguments; prints through `out` (and `err`) and returns the
 * exit code: 0 when the tree matches the list, 1 when it does not, 2 when the check cannot run.
 */
export function checkSizes(argv, { out = console.log, err = console.error } = {}) {
  let options;
  let listed;
  try {
    options = parseArgs(argv);
    listed = readList(options.list);
  } catch (error) {
    if (!(error instanceof UsageError || error instanceof SyntaxError)) throw error;
    err(`check-sizes: ${error.message}`);
    return 2;
  }
  const found = measure(options.root);
  const fromRoot = relative(options.root, options.list);
  const listName = fromRoot.startsWith('..') ? options.list : fromRoot.split(sep).join('/');
  const { rows, gone } = compare(found, listed);
  report(rows, gone, listName, out);
  out(summary(rows, gone));
  if (options.accept) {
    writeList(options.list, found);
    out(`check-sizes: recorded ${String(found.length)} excesses in ${listName}`);
    return 0;
  }
  const count = (...statuses) => rows.filter((row) => statuses.includes(row.status)).length;
  if (options.update) {
    const kept = rows
      .filter((row) => row.entry !== undefined)
      .map((row) => ({ ...row.entry, lines: Math.min(row.entry.lines, row.finding.lines) }));
    writeList(options.list, kept);
    out(
      `check-sizes: lowered ${String(count('shrank'))} and removed ${String(gone.length)} entries of ${listName}`,
    );
    const left = count('new', 'grew');
    if (left === 0) return 0;
    out(`check-sizes: FAILED: ${String(left)} new or grown excesses are left; --update never records them`);
    return 1;
  }
  const failing = count('new', 'grew', 'shrank') + gone.length;
  if (failing === 0) return 0;
  out(
    `check-sizes: FAILED: ${String(failing)} findings differ from ${listName}` +
      ' (shrank or gone: npm run check:sizes -- --update; new or grown: shorten the code)',
  );
  return 1;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === resolve(process.argv[1])) {
  process.exitCode = checkSizes(process.argv.slice(2));
}
