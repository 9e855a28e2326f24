/**
 * A Python interpreter that can `import redis` (redis-py), for the interop tests that run
 * redis-py's Lock against latchkey's SimpleLock.
 *
 * Candidates, first usable wins: LATCHKEY_TEST_PYTHON if set, then /usr/bin/python3 (where
 * Debian's python3-redis installs), then `python3` on PATH. The answer is looked up once per
 * process; tests skip, quoting `reason`, when there is none.
 */
import { spawnSync } from 'node:child_process';
import type { TestResources } from './resources.js';
import type { Worker } from './child.js';

export type RedisPython =
  | { readonly path: string; readonly redisPyVersion: string; readonly reason?: undefined }
  | { readonly path?: undefined; readonly redisPyVersion?: undefined; readonly reason: string };

/** The redis-py driver fixture; its protocol is described at its top. */
export const REDIS_PY_DRIVER = new URL('./fixtures/redis_py_lock.py', import.meta.url).pathname;

export const INSTALL_HINT =
  'install redis-py for /usr/bin/python3 (Debian/Ubuntu: `apt-get install python3-redis`), ' +
  'or `pip install redis` into a python3 and point LATCHKEY_TEST_PYTHON at it';

const PROBE_TIMEOUT_MS = 10_000;

// What the driver needs: redis-py's Lock with owned(), and CLOCK_MONOTONIC stamps (Python 3.7+).
const PROBE = [
  'import sys, time, redis',
  'from redis.lock import Lock',
  'assert hasattr(Lock, "owned"), "redis-py too old: redis.lock.Lock has no owned()"',
  'time.clock_gettime_ns(time.CLOCK_MONOTONIC)',
  'print(redis.__version__)',
].join('\n');

function candidates(): string[] {
  const fromEnv = process.env['LATCHKEY_TEST_PYTHON'];
  const list = ['/usr/bin/python3', 'python3'];
  return fromEnv !== undefined && fromEnv !== '' ? [fromEnv, ...list] : list;
}

/** Why `python` cannot be used, or its redis-py version. */
function probe(python: string): { version: string } | { failure: string } {
  const run = spawnSync(python, ['-c', PROBE], { encoding: 'utf8', timeout: PROBE_TIMEOUT_MS });
  if (run.error !== undefined) return { failure: run.error.message };
  if (run.status !== 0) {
    const lastLine = run.stderr.trim().split('\n').at(-1) ?? '';
    return { failure: lastLine === '' ? `exit status ${String(run.status)}` : lastLine };
  }
  return { version: run.stdout.trim() };
}

let found: RedisPython | undefined;

/** The first candidate interpreter with a usable redis-py, or why there is none (cached). */
export function redisPython(): RedisPython {
  if (found !== undefined) return found;
  const failures: string[] = [];
  for (const python of candidates()) {
    const outcome = probe(python);
    if ('version' in outcome) {
      found = { path: python, redisPyVersion: outcome.version };
      return found;
    }
    failures.push(`${python}: ${outcome.failure}`);
  }
  found = { reason: `no Python with redis-py (${failures.join('; ')}); ${INSTALL_HINT}` };
  return found;
}

/**
 * Starts the redis-py driver on `redisUrl` as a worker of `res` (killed in closeAll()) and
 * waits for its `ready`. Throws if there is no usable Python: check redisPython() first.
 */
export async function startRedisPyDriver(res: TestResources, redisUrl: string): Promise<Worker> {
  const python = redisPython();
  if (python.path === undefined) throw new Error(python.reason);
  const driver = res.spawn(python.path, ['-u', REDIS_PY_DRIVER], { REDIS_URL: redisUrl });
  await driver.next((msg) => msg['type'] === 'ready');
  return driver;
}
