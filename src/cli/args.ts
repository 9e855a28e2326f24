import { parseArgs } from 'node:util';
import { CliError, ExitCode } from './exit-codes.js';
import { NAMED_KINDS } from './layouts/index.js';
import type { LockKind } from './snapshot.js';

/** @internal */
export type CommandName = 'inspect' | 'list' | 'force-unlock' | 'watch';

/** Options every command takes. @internal */
export interface CommonOptions {
  /** The Redis URL, as given (it may hold a password: print it only through `redactUrl`). */
  readonly url: string;
  /** The `keyPrefix` the locks' LockClient uses; prepended to names to form keys. */
  readonly prefix: string;
  readonly json: boolean;
  /** Connect timeout and per-command time limit, in milliseconds. */
  readonly timeoutMs: number;
}

/** What the command line asks for. @internal */
export type Invocation =
  | { readonly command: 'help' }
  | { readonly command: 'version' }
  | {
      readonly command: 'inspect';
      readonly common: CommonOptions;
      readonly name: string;
      /** What the key is known to be (`--kind`): settles a counter that may be several kinds. */
      readonly kind: LockKind | undefined;
    }
  | {
      readonly command: 'list';
      readonly common: CommonOptions;
      /** A glob over lock names (the part after the prefix). */
      readonly pattern: string;
      readonly includeStrings: boolean;
      /** SCAN's COUNT hint. */
      readonly scanCount: number;
    }
  | {
      readonly command: 'force-unlock';
      readonly common: CommonOptions;
      readonly name: string;
      readonly yes: boolean;
      readonly kind: LockKind | undefined;
    }
  | {
      readonly command: 'watch';
      readonly common: CommonOptions;
      readonly name: string;
      readonly intervalMs: number;
      /** Stop after printing this many lines; undefined: no limit. */
      readonly count: number | undefined;
      /** Stop after this long; undefined: no limit. */
      readonly durationMs: number | undefined;
      readonly kind: LockKind | undefined;
    };

/** The default Redis URL when neither `--url` nor `REDIS_URL` is given. */
export const DEFAULT_URL = 'redis://127.0.0.1:6379';
const DEFAULT_TIMEOUT_MS = 5_000;
const DEFAULT_INTERVAL_MS = 250;
const DEFAULT_SCAN_COUNT = 500;
/** setTimeout's limit, as the library's `MAX_TIME_MS`. */
const MAX_MS = 2_147_483_647;

const OPTIONS = {
  url: { type: 'string' },
  prefix: { type: 'string' },
  json: { type: 'boolean' },
  timeout: { type: 'string' },
  yes: { type: 'boolean', short: 'y' },
  pattern: { type: 'string' },
  'include-strings': { type: 'boolean' },
  'scan-count': { type: 'string' },
  interval: { type: 'string' },
  count: { type: 'string' },
  duration: { type: 'string' },
  kind: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean' },
} as const;

type OptionName = keyof typeof OPTIONS;

const COMMON: readonly OptionName[] = ['url', 'prefix', 'json', 'timeout', 'help'];
const COMMANDS: Readonly<
  Record<CommandName, { readonly options: readonly OptionName[]; readonly takesName: boolean }>
> = {
  inspect: { options: ['kind'], takesName: true },
  list: { options: ['pattern', 'include-strings', 'scan-count'], takesName: false },
  'force-unlock': { options: ['yes', 'kind'], takesName: true },
  watch: { options: ['interval', 'count', 'duration', 'kind'], takesName: true },
};

function isCommand(value: string): value is CommandName {
  return Object.hasOwn(COMMANDS, value);
}

/** `text` in lines of at most `width` characters, each indented by `indent` spaces. */
function wrapped(text: string, indent: number, width: number): string {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line !== '' && indent + line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else {
      line = line === '' ? word : `${line} ${word}`;
    }
  }
  lines.push(line);
  return lines.map((each) => ' '.repeat(indent) + each).join('\n');
}

/** The help text `latchkey --help` prints. @internal */
export const HELP = `Usage: latchkey <command> [options]

Look at and repair latchkey's locks and synchronizers (and Redisson's, and SET NX PX locks)
in Redis: locks, fenced, fair and read-write locks, simple locks, semaphores, permit
semaphores and count-down latches.

Commands:
  inspect <name>        Kind, holders and hold counts, TTL, read/write mode, free permits and
                        permits out with their leases, latch count, fencing token and queued
                        waiters (with a fair lock's deadlines) of one key. Owner ids, tokens and
                        permit ids are never shown: each holder gets a label that is only
                        meaningful within one run.
  list                  Keys whose names match --pattern, found with SCAN (never KEYS).
  force-unlock <name>   Frees a lock whoever holds it, the way its kind does: waiters are woken
                        or handed it, a fair queue keeps its order, a read-write lock loses
                        readers and writer, a permit semaphore gets every permit back. Refuses
                        a semaphore or latch (nothing to free; says what to do instead). Asks
                        you to type the name unless --yes is given.
  watch <name>          Prints a line whenever the key's holders, hold counts, TTL range,
                        waiters, fencing token, mode, permits or count change, until Ctrl-C,
                        --count or --duration.

Options for every command:
  --url <url>           Redis URL (default: $REDIS_URL, else ${DEFAULT_URL})
  --prefix <prefix>     The keyPrefix of your LockClient: <name> is looked up as prefix + name
  --json                Machine-readable output: one JSON object (inspect, force-unlock) or
                        one JSON object per line (list, watch)
  --timeout <ms>        Connect timeout and time limit of each Redis call (default ${DEFAULT_TIMEOUT_MS})
  -h, --help            This help; --version prints the version

inspect, force-unlock, watch:
  --kind <kind>         What the key is, when its layout cannot tell (a bare counter may be a
                        semaphore, a permit semaphore or a count-down latch): one of
${wrapped(NAMED_KINDS.join(', '), 24, 94)}

list:
  --pattern <glob>      Glob over lock names, after the prefix (default *)
  --include-strings     Also list string keys: simple (SET NX PX) locks, semaphores, permit
                        semaphores, latches; it reads every string key that matches, so narrow
                        it with --pattern
  --scan-count <n>      COUNT hint for each SCAN call (default ${DEFAULT_SCAN_COUNT})

force-unlock:
  -y, --yes             Do not ask for confirmation (needed when stdin is not a terminal)

watch:
  --interval <ms>       How often to read the lock (default ${DEFAULT_INTERVAL_MS}); unlock messages
                        also trigger a read at once
  --count <n>           Stop after printing n lines (the first one is the current state)
  --duration <ms>       Stop after this long

Exit codes:
  0    done (inspect: one of the kinds is there)
  1    no lock there: free, or the key holds something that is not a lock
       (inspect, force-unlock)
  2    usage error
  3    Redis unreachable, too slow (--timeout) or answering with an error
  4    force-unlock refused: not confirmed, no terminal to ask on and no --yes, or
       a kind it must not touch (semaphore, count-down latch, counter)
  70   a bug in latchkey (the stack is printed; please report it)
  130  interrupted (Ctrl-C); watch stops with 0

Examples:
  latchkey inspect invoice:42 --prefix billing:
  latchkey list --pattern 'invoice:*' --json
  latchkey force-unlock invoice:42 --url redis://redis.internal:6379
  latchkey watch invoice:42 --interval 100
`;

function usage(message: string): CliError {
  return new CliError(ExitCode.USAGE, `${message}\nRun \`latchkey --help\` for usage.`);
}

/** A whole number in `[min, max]` given as option `--name`. */
function wholeNumber(name: string, text: string | undefined, min: number, max: number): number | undefined {
  if (text === undefined) return undefined;
  const value = /^\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw usage(
      `Expected \`--${name}\` to be a whole number from ${min} to ${max}, got ${JSON.stringify(text)}`,
    );
  }
  return value;
}

/** `--kind`: one of the kinds a key can be. */
function kindOption(text: string | undefined): LockKind | undefined {
  if (text === undefined) return undefined;
  const kind = NAMED_KINDS.find((candidate) => candidate === text);
  if (kind === undefined) {
    throw usage(`Expected \`--kind\` to be one of ${NAMED_KINDS.join(', ')}, got ${JSON.stringify(text)}`);
  }
  return kind;
}

function checkUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw usage('Expected the Redis URL (`--url` or REDIS_URL) to be a URL like redis://host:6379');
  }
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') {
    throw usage(
      `Expected \`--url\` to start with redis:// or rediss://, got ${JSON.stringify(parsed.protocol)}`,
    );
  }
  return url;
}

/**
 * Reads the command line (without `node` and the script). `env` supplies `REDIS_URL`.
 * @throws {@link CliError} with {@link ExitCode.USAGE} for anything it cannot make sense of.
 * @internal
 */
export function parseCommandLine(argv: readonly string[], env: NodeJS.ProcessEnv): Invocation {
  let parsed: ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true; strict: true }>>;
  try {
    parsed = parseArgs({ args: [...argv], options: OPTIONS, allowPositionals: true, strict: true });
  } catch (error) {
    throw usage(error instanceof Error ? error.message : String(error));
  }
  const { values, positionals } = parsed;
  if (values.help === true) return { command: 'help' };
  if (values.version === true) return { command: 'version' };

  const [commandName, ...rest] = positionals;
  if (commandName === undefined) throw usage('Missing a command: inspect, list, force-unlock or watch.');
  if (!isCommand(commandName)) {
    throw usage(
      `Unknown command ${JSON.stringify(commandName)}; expected inspect, list, force-unlock or watch.`,
    );
  }
  const spec = COMMANDS[commandName];
  for (const option of Object.keys(values) as OptionName[]) {
    if (option !== 'version' && !COMMON.includes(option) && !spec.options.includes(option)) {
      throw usage(`Option \`--${option}\` does not apply to \`${commandName}\`.`);
    }
  }
  let name = '';
  if (spec.takesName) {
    if (rest.length !== 1 || rest[0] === undefined) {
      throw usage(`\`${commandName}\` takes exactly one lock name, got ${rest.length}.`);
    }
    name = rest[0];
    if (name.length === 0) throw usage('Expected a non-empty lock name.');
  } else if (rest.length > 0) {
    throw usage(`\`${commandName}\` takes no name, got ${JSON.stringify(rest.join(' '))}.`);
  }

  const common: CommonOptions = {
    url: checkUrl(values.url ?? env.REDIS_URL ?? DEFAULT_URL),
    prefix: values.prefix ?? '',
    json: values.json === true,
    timeoutMs: wholeNumber('timeout', values.timeout, 1, MAX_MS) ?? DEFAULT_TIMEOUT_MS,
  };
  switch (commandName) {
    case 'inspect':
      return { command: 'inspect', common, name, kind: kindOption(values.kind) };
    case 'list':
      return {
        command: 'list',
        common,
        pattern: values.pattern ?? '*',
        includeStrings: values['include-strings'] === true,
        scanCount: wholeNumber('scan-count', values['scan-count'], 1, 1_000_000) ?? DEFAULT_SCAN_COUNT,
      };
    case 'force-unlock':
      return {
        command: 'force-unlock',
        common,
        name,
        yes: values.yes === true,
        kind: kindOption(values.kind),
      };
    case 'watch':
      return {
        command: 'watch',
        common,
        name,
        intervalMs: wholeNumber('interval', values.interval, 10, MAX_MS) ?? DEFAULT_INTERVAL_MS,
        count: wholeNumber('count', values.count, 1, Number.MAX_SAFE_INTEGER),
        durationMs: wholeNumber('duration', values.duration, 0, MAX_MS),
        kind: kindOption(values.kind),
      };
  }
}
