/**
 * The oldest Redis server latchkey's scripts run on: they use `LPOS`, new in 6.0.6.
 * @internal
 */
export const MIN_REDIS_VERSION = '6.0.6';

/**
 * The `redis_version` field of an `INFO server` reply, as text (Valkey reports the Redis version
 * it is compatible with there), or undefined when the reply has none.
 * @internal
 */
export function redisVersionOf(info: unknown): string | undefined {
  if (typeof info !== 'string') return undefined;
  const match = /^redis_version:([^\r\n]*)/m.exec(info);
  const version = match?.[1]?.trim();
  return version === undefined || version === '' ? undefined : version;
}

/**
 * Whether `version` (dotted numbers, as `INFO` reports them: `7.2.4`, `6.0.5`, `255.255.255`)
 * is `minimum` or later. A part that is not a number counts as 0, and missing parts as 0
 * (`6.2` is `6.2.0`).
 * @internal
 */
export function isAtLeast(version: string, minimum: string): boolean {
  const parts = (text: string): number[] => text.split('.').map((part) => Number.parseInt(part, 10) || 0);
  const have = parts(version);
  const need = parts(minimum);
  for (let i = 0; i < Math.max(have.length, need.length); i += 1) {
    const a = have[i] ?? 0;
    const b = need[i] ?? 0;
    if (a !== b) return a > b;
  }
  return true;
}
