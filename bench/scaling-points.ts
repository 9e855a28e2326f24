// The points of the scaling curves and the scenario name of each, shared by the scenario that
// measures them and the report that draws them.

export const CONTENDER_POINTS = [2, 8, 32, 128] as const;
export const KEY_POINTS = [1, 1_000, 100_000] as const;
/** The points a quick run measures (the rest are skipped). */
export const QUICK_CONTENDER_POINTS: readonly number[] = [2, 8, 32];
export const QUICK_KEY_POINTS: readonly number[] = [1, 1_000];
/** The contenders the curves are drawn for: latchkey and the fastest peer (bounds the full run). */
export const SCALING_CONTENDERS: readonly string[] = ['latchkey', 'redis-semaphore'];

export const contenderPoint = (n: number): string => `scaling-contenders-${n}`;
export const keyPoint = (n: number): string => `scaling-keys-${n}`;
export const isScalingPoint = (scenario: string): boolean => scenario.startsWith('scaling-');
