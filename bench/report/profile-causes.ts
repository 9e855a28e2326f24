// What a profile run (bench/results/profile.json) says about each missed target, in a few words
// with their figures: read by the profile's own report and by the targets table of latest.md.
// The comparisons: latchkey against floor-rlock (its own scripts sent by a bare node-redis
// client) in the hand-off and the uncontended cycle, latchkey's Lock against floor-pubsub (a
// waiter that is one subscribed channel and one pending promise) in heap, and a semaphore
// waiter against a lock waiter.
import type { CpuLoop, HeapPass, ProfileResults } from '../profile/model.js';
import { CATEGORIES, type Category } from '../profile/origins.js';

/** The targets a profile speaks to. */
export type ProfileTopic = 'handoff' | 'uncontended' | 'heap' | 'kinds';

/** The contender latchkey is held to in the CPU loops, and in heap. */
export const CPU_FLOOR = 'floor-rlock';
export const HEAP_FLOOR = 'floor-pubsub';

/** A time in µs with one decimal, a size in whole bytes. */
export const us = (value: number): string => value.toFixed(1);
export const bytes = (value: number): string => String(Math.round(value));
const signed = (value: number, format: (v: number) => string): string =>
  `${value >= 0 ? '+' : '−'}${format(Math.abs(value))}`;

export function loopOf(
  profile: ProfileResults,
  loop: CpuLoop['loop'],
  contender: string,
): CpuLoop | undefined {
  return profile.cpu.loops.find((one) => one.loop === loop && one.contender === contender);
}

/** µs per cycle by category, summed over the loop's processes. */
export function summed(loop: CpuLoop, table: 'categories' | 'callers'): Record<Category, number> {
  const sum = Object.fromEntries(CATEGORIES.map((category) => [category, 0])) as Record<Category, number>;
  for (const role of loop.roles) for (const category of CATEGORIES) sum[category] += role[table][category];
  return sum;
}

/** CPU per cycle: every category but idle. */
export function cpuOf(table: Readonly<Record<Category, number>>): number {
  return CATEGORIES.filter((category) => category !== 'idle').reduce(
    (sum, category) => sum + table[category],
    0,
  );
}

/** One function's µs per cycle in latchkey's loop and in the floor's, over all processes. */
export interface FunctionGap {
  readonly label: string;
  readonly category: Category;
  readonly latchkey: number;
  readonly floor: number;
}

/**
 * The functions of both loops by latchkey's time less the floor's, largest first. A function
 * outside one loop's listed top counts as 0 there.
 */
export function functionGaps(latchkey: CpuLoop, floor: CpuLoop): FunctionGap[] {
  const gaps = new Map<string, { category: Category; latchkey: number; floor: number }>();
  const add = (loop: CpuLoop, side: 'latchkey' | 'floor'): void => {
    for (const role of loop.roles)
      for (const fn of role.functions) {
        const gap = gaps.get(fn.label) ?? { category: fn.category, latchkey: 0, floor: 0 };
        gap[side] += fn.us;
        gaps.set(fn.label, gap);
      }
  };
  add(latchkey, 'latchkey');
  add(floor, 'floor');
  return [...gaps]
    .map(([label, gap]) => ({ label, ...gap }))
    .sort((a, b) => b.latchkey - b.floor - (a.latchkey - a.floor));
}

/** A function's label without its file, for a sentence. */
const short = (label: string): string => label.replace(/ \(.*\)$/, '');

/** Node's time by module, summed over a loop's processes. */
function modulesOf(loop: CpuLoop): Map<string, number> {
  const sum = new Map<string, number>();
  for (const role of loop.roles)
    for (const [module, time] of Object.entries(role.modules)) sum.set(module, (sum.get(module) ?? 0) + time);
  return sum;
}

/** Node's modules by latchkey's time less the floor's, largest first. */
export function moduleGaps(latchkey: CpuLoop, floor: CpuLoop): { module: string; gap: number }[] {
  const [mine, theirs] = [modulesOf(latchkey), modulesOf(floor)];
  return [...new Set([...mine.keys(), ...theirs.keys()])]
    .map((module) => ({ module, gap: (mine.get(module) ?? 0) - (theirs.get(module) ?? 0) }))
    .sort((a, b) => b.gap - a.gap);
}

/** The two loops of a CPU topic, when both were profiled. */
function cpuPair(profile: ProfileResults, loop: CpuLoop['loop']): [CpuLoop, CpuLoop] | undefined {
  const latchkey = loopOf(profile, loop, 'latchkey');
  const floor = loopOf(profile, loop, CPU_FLOOR);
  return latchkey === undefined || floor === undefined ? undefined : [latchkey, floor];
}

function cpuCause(
  profile: ProfileResults,
  loop: CpuLoop['loop'],
  unit: string,
  brief: boolean,
): string | undefined {
  const pair = cpuPair(profile, loop);
  if (pair === undefined) return undefined;
  const [latchkey, floor] = pair;
  const [mine, theirs] = [summed(latchkey, 'callers'), summed(floor, 'callers')];
  // GC is the process's, whichever contender's turn it falls in: left aside.
  const [busyL, busyF] = [cpuOf(mine) - mine.GC, cpuOf(theirs) - theirs.GC];
  const top = functionGaps(latchkey, floor)
    .slice(0, 3)
    .map((gap) => `${short(gap.label)} ${signed(gap.latchkey - gap.floor, us)}`);
  const head = `busy (GC aside) ${us(busyL)} µs per ${unit} against floor-rlock's ${us(busyF)} µs`;
  if (brief) return `${head}; largest gaps: ${top.join(', ')} µs`;
  const modules = moduleGaps(latchkey, floor)
    .slice(0, 3)
    .map((one) => `${one.module} ${signed(one.gap, us)}`);
  return `${head} (${signed(busyL - busyF, us)}; GC ${us(mine.GC)} against ${us(theirs.GC)} µs); laid to the code that asked: latchkey's ${us(mine.latchkey)} µs (its own functions ${us(summed(latchkey, 'categories').latchkey)}, the rest Node's work for it), node-redis ${us(mine['node-redis'])} against ${us(theirs['node-redis'])} µs; largest gaps by function: ${top.join(', ')} µs; by Node module: ${modules.join(', ')} µs`;
}

/** Net bytes by type of a heap pass: its holder's and its waiter's, or one of them. */
export function netByType(pass: HeapPass, shares: readonly ('holder' | 'waiter')[]): Map<string, number> {
  const net = new Map<string, number>();
  for (const share of shares)
    for (const row of pass[share].types)
      if (!row.type.endsWith(' other types)')) net.set(row.type, (net.get(row.type) ?? 0) + row.net);
  return net;
}

/** Objects per key of each type added in a share. */
function objectsByType(pass: HeapPass, share: 'holder' | 'waiter'): Map<string, number> {
  return new Map(pass[share].types.map((row) => [row.type, row.objects]));
}

/** V8's containers, which say little by their own name. */
const CONTAINERS = new Set(['(array)', '(object elements)', '(object properties)']);

/**
 * A type for a sentence: one of V8's containers with what mostly holds it in `pass`, e.g.
 * `(array) in Set.table`.
 */
export function described(pass: HeapPass, share: 'holder' | 'waiter', type: string): string {
  if (!CONTAINERS.has(type)) return type;
  const holder = pass[share].types.find((row) => row.type === type)?.heldBy.replace(/ \(\d+%\)$/, '');
  return holder === undefined || holder === '' ? type : `${type} in ${holder}`;
}

/** The types whose net bytes grew the most from `floor` to `mine`, as `type +n B`. */
export function typeGaps(
  mine: ReadonlyMap<string, number>,
  floor: ReadonlyMap<string, number>,
): { readonly type: string; readonly gap: number }[] {
  const types = new Set([...mine.keys(), ...floor.keys()]);
  return [...types]
    .map((type) => ({ type, gap: (mine.get(type) ?? 0) - (floor.get(type) ?? 0) }))
    .sort((a, b) => b.gap - a.gap);
}

export function passOf(profile: ProfileResults, label: string): HeapPass | undefined {
  return profile.heap.passes.find((pass) => pass.label === label);
}

const perLock = (pass: HeapPass): number => pass.holder.measured + pass.waiter.measured;

function heapCause(profile: ProfileResults, brief: boolean): string | undefined {
  const lock = passOf(profile, 'latchkey Lock');
  const floor = passOf(profile, HEAP_FLOOR);
  if (lock === undefined || floor === undefined) return undefined;
  const gapsOf = (share: 'holder' | 'waiter', count: number): string[] =>
    typeGaps(netByType(lock, [share]), netByType(floor, [share]))
      .slice(0, count)
      .map((one) => `${described(lock, share, one.type)} ${signed(one.gap, bytes)} B`);
  const head = `a held Lock with its waiter ${bytes(perLock(lock))} B against floor-pubsub's ${bytes(perLock(floor))} B`;
  if (brief) return `${head}; largest gaps: a waiter's ${gapsOf('waiter', 3).join(', ')}`;
  const allocated = (pass: HeapPass, category: Category): number =>
    (pass.holder.byCategory[category] ?? 0) + (pass.waiter.byCategory[category] ?? 0);
  return `${head} (${signed(perLock(lock) - perLock(floor), bytes)} B: the held lock ${signed(lock.holder.measured - floor.holder.measured, bytes)}, the waiter ${signed(lock.waiter.measured - floor.waiter.measured, bytes)}); allocated by latchkey's code ${bytes(allocated(lock, 'latchkey'))} B, by node-redis ${bytes(allocated(lock, 'node-redis'))} B against ${bytes(allocated(floor, 'node-redis'))} B; largest gaps by type: the waiter's ${gapsOf('waiter', 5).join(', ')}; the held lock's ${gapsOf('holder', 3).join(', ')}`;
}

function kindsCause(profile: ProfileResults, brief: boolean): string | undefined {
  const lock = passOf(profile, 'latchkey Lock');
  const semaphore = profile.heap.passes.find((pass) => pass.kind === 'semaphore');
  if (lock === undefined || semaphore === undefined) return undefined;
  const [mine, theirs] = [objectsByType(semaphore, 'waiter'), objectsByType(lock, 'waiter')];
  const gaps = typeGaps(netByType(semaphore, ['waiter']), netByType(lock, ['waiter']))
    .slice(0, brief ? 4 : 6)
    .map(
      (one) =>
        `${described(semaphore, 'waiter', one.type)} ${signed(one.gap, bytes)} B (${(mine.get(one.type) ?? 0).toFixed(0)} against ${(theirs.get(one.type) ?? 0).toFixed(0)})`,
    );
  const head = `a Semaphore waiter ${bytes(semaphore.waiter.measured)} B against a Lock waiter's ${bytes(lock.waiter.measured)} B`;
  if (brief) return `${head}; largest gaps (objects per waiter): ${gaps.join(', ')}`;
  return `${head}; allocated by latchkey's code ${bytes(semaphore.waiter.byCategory.latchkey ?? 0)} B against ${bytes(lock.waiter.byCategory.latchkey ?? 0)} B; largest gaps by type (objects per waiter): ${gaps.join(', ')}`;
}

/**
 * Each topic's causes as the profile measured them; a topic it did not measure is left out.
 * `brief`: the few words a target's row has room for.
 */
export function profileCauses(profile: ProfileResults, brief = false): Partial<Record<ProfileTopic, string>> {
  const causes: Partial<Record<ProfileTopic, string>> = {};
  const set = (topic: ProfileTopic, text: string | undefined): void => {
    if (text !== undefined) causes[topic] = text;
  };
  set('handoff', cpuCause(profile, 'handoff', 'hand-off (holder + waiter)', brief));
  set('uncontended', cpuCause(profile, 'uncontended', 'cycle', brief));
  set('heap', heapCause(profile, brief));
  set('kinds', kindsCause(profile, brief));
  return causes;
}
