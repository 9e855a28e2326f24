import { InvalidArgumentError } from './errors.js';

/** Longest lock name accepted, in UTF-16 code units (`name.length`). */
export const MAX_NAME_LENGTH = 1024;

/** Longest `keyPrefix` accepted, in UTF-16 code units. */
export const MAX_PREFIX_LENGTH = 256;

/** The largest time latchkey accepts, in milliseconds: about 24.8 days, setTimeout's limit. */
export const MAX_TIME_MS = 2_147_483_647;

/** @internal */
export function describe(value: unknown): string {
  if (typeof value === 'string') {
    const shown = value.length > 40 ? `${value.slice(0, 40)}…` : value;
    return `${JSON.stringify(shown)} (string of length ${value.length})`;
  }
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean') {
    return `\`${String(value)}\` (${typeof value})`;
  }
  if (value === null) return '`null`';
  if (value === undefined) return '`undefined`';
  if (Array.isArray(value)) return 'an array';
  return `a value of type ${typeof value}`;
}

// Characters that would make a key unreadable in redis-cli, logs and MONITOR output.
const CONTROL = /[\u0000-\u001f\u007f]/;

/**
 * Checks the braces of a full key: none, or exactly one non-empty `{tag}`. A lone brace or an
 * empty `{}` would hash the key and its unlock channel to different cluster slots.
 * @internal
 */
function bracesProblem(key: string): string | undefined {
  // Scanned in place: a handle is made on every call of lock(), so no arrays are made here.
  const start = key.indexOf('{');
  const end = key.indexOf('}');
  if (start === -1 && end === -1) return undefined;
  if (start === -1 || end < start || key.indexOf('{', start + 1) !== -1 || key.indexOf('}', end + 1) !== -1) {
    return 'braces must form exactly one `{hash tag}`';
  }
  if (end === start + 1) return 'an empty `{}` hash tag is not allowed';
  return undefined;
}

/** @internal */
export function checkText(what: string, value: unknown, maxLength: number, allowEmpty: boolean): string {
  if (typeof value !== 'string') {
    throw new InvalidArgumentError(`Expected \`${what}\` to be a string, got ${describe(value)}`);
  }
  if (!allowEmpty && value.trim().length === 0) {
    throw new InvalidArgumentError(
      `Expected \`${what}\` to be a non-empty string with a visible character, got ${describe(value)}`,
    );
  }
  if (value.length > maxLength) {
    throw new InvalidArgumentError(
      `Expected \`${what}\` to be at most ${maxLength} characters long, got ${describe(value)}`,
    );
  }
  if (!value.isWellFormed()) {
    throw new InvalidArgumentError(
      `Expected \`${what}\` to be well-formed Unicode (no lone surrogates), got ${describe(value)}`,
    );
  }
  if (CONTROL.test(value)) {
    throw new InvalidArgumentError(
      `Expected \`${what}\` to have no control characters, got ${describe(value)}`,
    );
  }
  return value;
}

/**
 * Checks the braces of the full key `keyPrefix + name`, naming both in the message.
 * @internal
 */
export function checkKey(name: string, key: string): void {
  const problem = bracesProblem(key);
  if (problem !== undefined) {
    const where = key === name ? '' : ` (lock key ${describe(key)})`;
    throw new InvalidArgumentError(`Invalid \`name\` ${describe(name)}${where}: ${problem}`);
  }
}

/**
 * A duration in milliseconds: a finite whole number in `[min, MAX_TIME_MS]`.
 * @internal
 */
export function checkDuration(what: string, value: unknown, min: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > MAX_TIME_MS) {
    throw new InvalidArgumentError(
      `Expected \`${what}\` to be a whole number of milliseconds from ${min} to ${MAX_TIME_MS}, got ${describe(value)}`,
    );
  }
  return value;
}

/**
 * A wait in milliseconds: like {@link checkDuration}, or `Infinity` for "wait forever".
 * @internal
 */
export function checkWait(what: string, value: unknown): number {
  if (value === Number.POSITIVE_INFINITY) return value;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > MAX_TIME_MS) {
    throw new InvalidArgumentError(
      `Expected \`${what}\` to be a whole number of milliseconds from 0 to ${MAX_TIME_MS}, or Infinity, got ${describe(value)}`,
    );
  }
  return value;
}

/** @internal */
export function checkSignal(what: string, value: unknown): AbortSignal | undefined {
  if (value === undefined) return undefined;
  if (!(value instanceof AbortSignal)) {
    throw new InvalidArgumentError(`Expected \`${what}\` to be an AbortSignal, got ${describe(value)}`);
  }
  return value;
}

/** @internal */
export function checkBoolean(what: string, value: unknown): boolean {
  if (typeof value !== 'boolean') {
    throw new InvalidArgumentError(`Expected \`${what}\` to be a boolean, got ${describe(value)}`);
  }
  return value;
}

/**
 * Options must be a plain object (or omitted) whose keys are all known: a misspelt option is
 * a bug the caller wants to hear about, not a silent default.
 * @internal
 */
export function checkOptions<K extends string>(
  what: string,
  value: unknown,
  known: readonly K[],
): Partial<Record<K, unknown>> {
  if (value === undefined) return {};
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidArgumentError(`Expected \`${what}\` to be an options object, got ${describe(value)}`);
  }
  for (const key of Object.keys(value)) {
    if (!(known as readonly string[]).includes(key)) {
      throw new InvalidArgumentError(
        `Unknown option \`${key}\` in \`${what}\`; expected one of ${known.map((k) => `\`${k}\``).join(', ')}`,
      );
    }
  }
  return value;
}
