// The Markdown report of a profile run (bench/results/profile.md): the causes of each missed
// target in short, then the heap of each waiting kind by type and by allocating code, and the
// CPU of the hand-off and the uncontended cycle by category and by function, each beside its
// floor.
import type { CpuLoop, HeapPass, HeapShare, ProfileResults } from '../profile/model.js';
import { CATEGORIES, CATEGORY_MEANING } from '../profile/origins.js';
import {
  bytes,
  cpuOf,
  CPU_FLOOR,
  functionGaps,
  HEAP_FLOOR,
  loopOf,
  moduleGaps,
  profileCauses,
  summed,
  us,
} from './profile-causes.js';

/** Types shown per table; the rest are summed in one row. */
const TYPES_SHOWN = 14;
const SITES_SHOWN = 8;
const FUNCTIONS_SHOWN = 14;
const MODULES_SHOWN = 6;

/** What the V8 names of the heap tables stand for. */
const GLOSSARY: readonly string[] = [
  "`(array)`: V8's internal arrays — a Set's or Map's hash table (`Set.table`), a suspended async function's saved registers (`Generator.parameters_and_registers`), an object's elements.",
  '`(string)`: a flat string (key and channel names, owner ids); held by `(concatenated string).first`, it is the flat copy V8 made of a concatenated string. `(concatenated string)`: a string made by `+` or a template, kept as a 32-byte node that points at its two parts (once flattened, at its flat copy). `(heap number)`: a number field that does not fit a small integer (a time, a deadline).',
  '`name()`: a closure (`(anonymous)()` an arrow function); `system / Context`: the variables a closure captures. `Promise`, `system / PromiseReaction` (one `then` or `await` on a promise), `Generator` (a suspended async function).',
  "`(object properties)`: an object's properties kept apart from it; 256 B per held lock for every contender: the harness's `release` closure, which tsx (keepNames) gives a `name` property of its own — the harness's cost, in the floor too.",
  '`(code)`, `(object shape)`: compiled code and hidden classes, made once per process (left before the snapshots by a warm-up round); what remains is noise.',
];

function heapSummary(passes: readonly HeapPass[]): string[] {
  const lines = [
    '| pass | held lock: measured | snapshots | sampled | waiter: measured | snapshots | sampled | together |',
    '|---|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const pass of passes) {
    const { holder, waiter } = pass;
    lines.push(
      `| ${pass.label} | ${bytes(holder.measured)} | ${bytes(holder.snapshotDelta)} | ${bytes(holder.sampled)} | ${bytes(waiter.measured)} | ${bytes(waiter.snapshotDelta)} | ${bytes(waiter.sampled)} | ${bytes(holder.measured + waiter.measured)} |`,
    );
  }
  return [...lines, ''];
}

function typesTable(share: HeapShare): string[] {
  const rows = share.types.filter((row) => !row.type.endsWith(' other types)'));
  const shown = rows.slice(0, TYPES_SHOWN);
  // Every type's net bytes add up to the snapshots' difference.
  const rest = share.snapshotDelta - shown.reduce((sum, row) => sum + row.net, 0);
  const lines = [
    '| type | objects | net B | added B | gone B | held mostly by |',
    '|---|---:|---:|---:|---:|---|',
  ];
  for (const row of shown)
    lines.push(
      `| ${row.type} | ${row.objects} | ${bytes(row.net)} | ${bytes(row.added)} | ${bytes(row.gone)} | ${row.heldBy} |`,
    );
  lines.push(`| (every other type) | | ${bytes(rest)} | | | |`);
  return [...lines, ''];
}

function sitesLine(share: HeapShare): string[] {
  const byLibrary = CATEGORIES.filter((category) => (share.byCategory[category] ?? 0) >= 0.5)
    .map((category) => `${category} ${bytes(share.byCategory[category] ?? 0)} B`)
    .join(', ');
  const lines = [
    `Allocated by (sampling heap profile, ${bytes(share.sampled)} B): ${byLibrary}.`,
    '',
    '| allocated by | library | B |',
    '|---|---|---:|',
  ];
  for (const site of share.sites.slice(0, SITES_SHOWN))
    lines.push(`| ${site.site} | ${site.category} | ${bytes(site.bytes)} |`);
  return [...lines, ''];
}

function heapSection(profile: ProfileResults): string[] {
  const { waiters, passes } = profile.heap;
  const lines = [
    '## Heap: a held key with a waiter',
    '',
    `Each pass runs in a fresh worker with \`--expose-gc\`: a holder session takes ${waiters.toLocaleString('en-US')} keys and a waiter session, in the same process, waits on each, with the many-keys scenario's own steps (\`manyKeys.hold\`, \`manyKeys.wait\`, its heap reading; \`manyKeysKind.*\` for the Semaphore of 1 permit and the CountDownLatch of count 1). A first round of 500 keys with their waiters, given back, leaves behind what a process makes once. Heap snapshots are taken before the holds, once every key is held, and once every key has its waiter and the server's subscriptions stopped moving; objects are told apart by the ids V8 keeps across snapshots. _added_: objects in the later snapshot only, by type (constructor, closure name, V8 internal kind), their self sizes per key; _gone_: objects only in the earlier one; _net_: added less gone. _held mostly by_: the first strong reference to the added objects of that type (\`Holder.field\`), with its share of their bytes. _measured_: the scenario's own figure in this run (used heap after GC, per key), beside the snapshots' total and the sampling heap profiler's estimate (one sample per 256 B allocated on average, objects still alive at the snapshot, laid to the innermost function on the allocating stack that is not Node's own). The leases are the libraries' defaults: a snapshot stops the process for seconds, longer than the scenario's 3 s lease. Bytes per held key, or per waiter.`,
    '',
    ...heapSummary(passes),
  ];
  const lock = passes.find((pass) => pass.label === 'latchkey Lock');
  const floor = passes.find((pass) => pass.contender === HEAP_FLOOR);
  if (lock !== undefined && floor !== undefined) {
    const own = lock.holder.measured + lock.waiter.measured - floor.holder.measured - floor.waiter.measured;
    lines.push(
      `latchkey's own heap per held lock with a waiter (the Lock's less ${HEAP_FLOOR}'s): ${bytes(own)} B.`,
      '',
    );
  }
  lines.push(...GLOSSARY.map((text) => `- ${text}`), '');
  for (const pass of passes) {
    lines.push(`### ${pass.label}: a waiter`, '', ...typesTable(pass.waiter), ...sitesLine(pass.waiter));
    lines.push(`### ${pass.label}: a held ${pass.kind === 'lock' ? 'lock' : pass.kind}`, '');
    lines.push(...typesTable(pass.holder), ...sitesLine(pass.holder));
  }
  return lines;
}

function categoryTable(latchkey: CpuLoop, floor: CpuLoop, table: 'categories' | 'callers'): string[] {
  const head = latchkey.roles.length > 1 ? latchkey.roles.map((role) => role.role) : [];
  const columns = [
    ...head.map((role) => `latchkey ${role}`),
    'latchkey',
    ...head.map((role) => `${CPU_FLOOR} ${role}`),
    CPU_FLOOR,
    'difference',
  ];
  const lines = [
    `| ${table === 'categories' ? 'category' : 'laid to'} | ${columns.join(' | ')} |`,
    `|---|${columns.map(() => '---:').join('|')}|`,
  ];
  const [mine, theirs] = [summed(latchkey, table), summed(floor, table)];
  const row = (
    label: string,
    pick: (t: Readonly<Record<(typeof CATEGORIES)[number], number>>) => number,
  ): void => {
    const cells = [
      ...(head.length > 0 ? latchkey.roles.map((role) => us(pick(role[table]))) : []),
      us(pick(mine)),
      ...(head.length > 0 ? floor.roles.map((role) => us(pick(role[table]))) : []),
      us(pick(theirs)),
      us(pick(mine) - pick(theirs)),
    ];
    lines.push(`| ${label} | ${cells.join(' | ')} |`);
  };
  for (const category of CATEGORIES) row(category, (t) => t[category]);
  row('**busy** (all but idle)', cpuOf);
  row('**busy, GC aside**', (t) => cpuOf(t) - t.GC);
  return [...lines, ''];
}

function gapsTable(latchkey: CpuLoop, floor: CpuLoop): string[] {
  const lines = [
    `| function | category | latchkey µs | ${CPU_FLOOR} µs | difference |`,
    '|---|---|---:|---:|---:|',
  ];
  for (const gap of functionGaps(latchkey, floor).slice(0, FUNCTIONS_SHOWN))
    lines.push(
      `| ${gap.label} | ${gap.category} | ${us(gap.latchkey)} | ${us(gap.floor)} | ${us(gap.latchkey - gap.floor)} |`,
    );
  return [...lines, ''];
}

function modulesTable(latchkey: CpuLoop, floor: CpuLoop): string[] {
  const lines = [`| Node module | latchkey − ${CPU_FLOOR} µs |`, '|---|---:|'];
  for (const { module, gap } of moduleGaps(latchkey, floor).slice(0, MODULES_SHOWN))
    lines.push(`| ${module} | ${us(gap)} |`);
  return [...lines, ''];
}

function ownFunctions(latchkey: CpuLoop): string[] {
  const own = new Map<string, number>();
  for (const role of latchkey.roles)
    for (const fn of role.functions)
      if (fn.category === 'latchkey') own.set(fn.label, (own.get(fn.label) ?? 0) + fn.us);
  const lines = ['| latchkey function | µs |', '|---|---:|'];
  for (const [label, time] of [...own].sort((a, b) => b[1] - a[1]).slice(0, FUNCTIONS_SHOWN))
    lines.push(`| ${label} | ${us(time)} |`);
  return [...lines, ''];
}

/** What Redis received per cycle from each contender, when the loop counted it. */
function sentLine(latchkey: CpuLoop, floor: CpuLoop, unit: string): string {
  if (latchkey.bytesToRedis === undefined || floor.bytesToRedis === undefined) return '';
  return ` Bytes Redis received per ${unit} (INFO stats): latchkey ${latchkey.bytesToRedis}, ${CPU_FLOOR} ${floor.bytesToRedis}.`;
}

function cpuLoopSection(
  profile: ProfileResults,
  loop: CpuLoop['loop'],
  title: string,
  unit: string,
): string[] {
  const latchkey = loopOf(profile, loop, 'latchkey');
  const floor = loopOf(profile, loop, CPU_FLOOR);
  if (latchkey === undefined || floor === undefined) return [];
  return [
    `### ${title}`,
    '',
    `${profile.cpu.windows[loop]}. ${latchkey.cycles} ${unit}s each. Wall time per ${unit}: latchkey ${us(latchkey.wallUs)} µs (median ${us(latchkey.medianUs)}), ${CPU_FLOOR} ${us(floor.wallUs)} µs (median ${us(floor.medianUs)}).${sentLine(latchkey, floor, unit)} µs per ${unit}, by the category of the function sampled:`,
    '',
    ...categoryTable(latchkey, floor, 'categories'),
    `The same samples laid to the code that asked for them: the innermost function on the stack that is a library's or the benchmark's (Node's work for it — an AbortSignal, a socket write, a timer — counted with it):`,
    '',
    ...categoryTable(latchkey, floor, 'callers'),
    'The functions whose self time differs the most (µs per ' + unit + ', every process):',
    '',
    ...gapsTable(latchkey, floor),
    `Node's own time (the node category) by module, latchkey's less ${CPU_FLOOR}'s, µs per ${unit}:`,
    '',
    ...modulesTable(latchkey, floor),
    `latchkey's own functions (its bundle, named by its source map), µs per ${unit}:`,
    '',
    ...ownFunctions(latchkey),
  ];
}

function cpuSection(profile: ProfileResults): string[] {
  return [
    '## CPU: the hand-off and the uncontended cycle',
    '',
    `latchkey's Lock and \`${CPU_FLOOR}\` (latchkey's own lock scripts on its key layout, sent by a bare node-redis client), by turns in the same processes, under V8's sampling profiler (the inspector's \`Profiler\`, a sample every ${profile.cpu.intervalUs} µs asked for; on a busy machine they come further apart). A sample counts for the time to the next one, inside the windows of its contender only. GC is the process's, whichever contender's turn it falls in (garbage of both, and the harness's). _busy_ is every sample but idle: JavaScript running, native code, garbage collection — and a native call's own wait: \`writeUtf8String\`, the socket write, is a send on loopback that wakes Redis, and on a busy machine the process may wait inside it while Redis runs. Categories:`,
    '',
    ...CATEGORIES.map((category) => `- ${category}: ${CATEGORY_MEANING[category]}`),
    '',
    ...cpuLoopSection(profile, 'handoff', 'Hand-off', 'hand-off'),
    ...cpuLoopSection(profile, 'uncontended', 'Uncontended acquire + release', 'cycle'),
  ];
}

/** The whole report of a profile run, as bench/results/profile.md has it. */
export function renderProfile(profile: ProfileResults): string {
  const { env } = profile;
  const causes = profileCauses(profile);
  const said: [string, string | undefined][] = [
    [`Hand-off (target ≤ 1.05× ${CPU_FLOOR})`, causes.handoff],
    [`Uncontended cycle (target ≤ 1.05× ${CPU_FLOOR})`, causes.uncontended],
    [`Heap per held lock with a waiter (target ≤ 1 KB above ${HEAP_FLOOR})`, causes.heap],
    ['A semaphore waiter against a lock waiter (target ≤ 1×)', causes.kinds],
  ];
  const lines = [
    '# latchkey profiles',
    '',
    `Written by \`npm run bench:profile\` on ${env.date}: Node ${env.node}, Redis ${env.redis}, ${env.cpuModel} (${env.cores} cores), ${env.os}; load average at the start ${env.loadAverage.join(', ')}; ${env.seconds} s.`,
    '',
    'The machine may be shared with other work, so absolute times move with its load from one run to the next, and the profiler itself slows every contender down. Read the proportions — bytes by type, time by category and by function — and each figure beside its floor, measured in the same run by turns.',
    '',
    '## In short',
    '',
    ...said.flatMap(([topic, text]) => (text === undefined ? [] : [`- **${topic}**: ${text}.`])),
    '',
    ...heapSection(profile),
    ...cpuSection(profile),
  ];
  return `${lines.join('\n')}\n`;
}
