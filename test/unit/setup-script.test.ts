/**
 * scripts/setup.mjs, the first step of `npm test` and `npm run demo`, run as a newcomer's
 * machine would run it: PATH is a directory of our own holding `node` and whatever stand-ins a
 * test puts there (an `apt-get` that records its calls, an `npm` that records its calls, a
 * `redis-server` that only answers --version), so the machine's own redis-server, Docker and
 * npm stay out of sight and nothing is installed for real.
 */
import { spawn } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

const SETUP = fileURLToPath(new URL('../../scripts/setup.mjs', import.meta.url));
/** "Within seconds": the whole point is to fail before the type check and lint even start. */
const FAST_MS = 5_000;
const NOBODY = 65_534;

const isRoot = process.getuid?.() === 0;
const osRelease = existsSync('/etc/os-release') ? readFileSync('/etc/os-release', 'utf8') : '';
const isDebianFamily =
  process.platform === 'linux' && /^(?:ID|ID_LIKE)=.*\b(?:debian|ubuntu)\b/m.test(osRelease);

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly ms: number;
}

const dirs: string[] = [];

afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A directory only this test uses, readable (and, with `open`, writable) by every user. */
function tempDir(open = false): string {
  const dir = mkdtempSync(join(tmpdir(), 'latchkey-setup-'));
  chmodSync(dir, open ? 0o777 : 0o755);
  dirs.push(dir);
  return dir;
}

/** A PATH directory holding `node` and the given stand-in scripts. */
function binDir(standIns: Record<string, string> = {}): string {
  const dir = tempDir(true);
  symlinkSync(process.execPath, join(dir, 'node'));
  for (const [name, body] of Object.entries(standIns)) {
    writeFileSync(join(dir, name), `#!/bin/sh\n${body}\n`);
    chmodSync(join(dir, name), 0o755);
  }
  return dir;
}

/** A stand-in that appends its arguments to `log` and exits 0. */
function recorder(log: string, extra = ''): string {
  return `echo "$*" >> '${log}'\n${extra}`;
}

function runSetup(
  script: string,
  args: readonly string[],
  env: Record<string, string>,
  options: { uid?: number; gid?: number } = {},
): Promise<Run> {
  const startedAt = performance.now();
  // Only what a shell would have; not this process's env, which may carry REDIS_URL.
  const child = spawn(process.execPath, [script, ...args], {
    env: { HOME: tmpdir(), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    ...options,
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  return new Promise((resolve) => {
    child.once('close', (code) => resolve({ code, stdout, stderr, ms: performance.now() - startedAt }));
  });
}

function occurrences(text: string, needle: string): number {
  return text.split(needle).length - 1;
}

/** A loopback port nothing listens on (it was free a moment ago). */
function closedPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => {
        if (address !== null && typeof address === 'object') resolve(address.port);
        else reject(new Error('no port'));
      });
    });
  });
}

describe('scripts/setup.mjs without Redis', () => {
  it('npm test: one message saying how to get redis-server, and a fast exit 1', async () => {
    const run = await runSetup(SETUP, ['test'], { PATH: binDir(), LATCHKEY_SETUP_NO_INSTALL: '1' });
    const context = `stdout:\n${run.stdout}\nstderr:\n${run.stderr}`;
    expect(run.code, context).toBe(1);
    expect(run.ms).toBeLessThan(FAST_MS);
    expect(occurrences(run.stderr, 'npm test needs redis-server'), context).toBe(1);
    expect(run.stderr).toContain('sudo apt-get install -y redis-server');
    expect(run.stderr).toContain('brew install redis');
    expect(run.stderr).toContain('not installed automatically: LATCHKEY_SETUP_NO_INSTALL is set');
    // Nothing else ran: no dependency install, no further steps.
    expect(run.stdout).toBe('');
  });

  it('npm run demo: one message, offering REDIS_URL as the other way', async () => {
    const run = await runSetup(SETUP, ['demo'], { PATH: binDir(), LATCHKEY_SETUP_NO_INSTALL: '1' });
    expect(run.code).toBe(1);
    expect(run.ms).toBeLessThan(FAST_MS);
    expect(occurrences(run.stderr, 'npm run demo needs Redis')).toBe(1);
    expect(run.stderr).toContain('REDIS_URL=redis://127.0.0.1:6379 npm run demo');
    expect(run.stdout).toBe('');
  });

  it.each(['test', 'demo'])('%s: a REDIS_URL that does not answer fails at once', async (mode) => {
    const port = await closedPort();
    const run = await runSetup(SETUP, [mode], {
      PATH: binDir({ 'redis-server': 'exit 0' }),
      REDIS_URL: `redis://127.0.0.1:${port}`,
    });
    expect(run.code).toBe(1);
    expect(run.ms).toBeLessThan(FAST_MS);
    expect(run.stderr).toContain(`REDIS_URL points at 127.0.0.1:${port}, which does not answer`);
  });

  it.runIf(isRoot && isDebianFamily)(
    'as root on Debian or Ubuntu: installs redis-server with apt-get and says so',
    async () => {
      const bin = binDir();
      const log = join(bin, 'apt-get.log');
      // The stand-in "installs" a redis-server that answers --version, as the package would.
      const install = `[ "$1" = install ] && printf '#!/bin/sh\\nexit 0\\n' > '${bin}/redis-server' && /bin/chmod 755 '${bin}/redis-server'`;
      writeFileSync(join(bin, 'apt-get'), `#!/bin/sh\n${recorder(log, install)}\nexit 0\n`);
      chmodSync(join(bin, 'apt-get'), 0o755);

      const run = await runSetup(SETUP, ['test'], { PATH: bin });
      const context = `stdout:\n${run.stdout}\nstderr:\n${run.stderr}`;
      expect(run.code, context).toBe(0);
      expect(run.stdout).toContain("installing Debian's redis-server package with apt-get");
      expect(run.stdout).toContain('redis-server installed');
      const calls = readFileSync(log, 'utf8').trim().split('\n');
      expect(calls).toEqual(['--version', 'update -q', 'install -y -q redis-server']);
    },
  );

  it.runIf(isRoot)('as another user: installs nothing, and says why', async () => {
    const log = join(tempDir(true), 'apt-get.log');
    const bin = binDir({ 'apt-get': recorder(log) });
    const run = await runSetup(SETUP, ['test'], { PATH: bin }, { uid: NOBODY, gid: NOBODY });
    const context = `stdout:\n${run.stdout}\nstderr:\n${run.stderr}`;
    expect(run.code, context).toBe(1);
    expect(run.ms).toBeLessThan(FAST_MS);
    expect(occurrences(run.stderr, 'npm test needs redis-server')).toBe(1);
    // On Debian or Ubuntu the reason is the user; elsewhere the system comes first.
    expect(run.stderr).toMatch(
      /not installed automatically: (you are not root|this is .*not Debian or Ubuntu)/,
    );
    expect(existsSync(log)).toBe(false);
  });
});

describe('scripts/setup.mjs and the dependencies', () => {
  /** A project of its own (the script works on the directory above it), with one dependency. */
  function project(installed: string | undefined): { root: string; npmLog: string; bin: string } {
    const root = tempDir();
    mkdirSync(join(root, 'scripts'));
    copyFileSync(SETUP, join(root, 'scripts', 'setup.mjs'));
    writeFileSync(join(root, 'package.json'), JSON.stringify({ devDependencies: { 'left-pad': '^1.3.0' } }));
    writeFileSync(
      join(root, 'package-lock.json'),
      JSON.stringify({ packages: { 'node_modules/left-pad': { version: '1.3.0' } } }),
    );
    if (installed !== undefined) {
      mkdirSync(join(root, 'node_modules', 'left-pad'), { recursive: true });
      writeFileSync(
        join(root, 'node_modules', 'left-pad', 'package.json'),
        JSON.stringify({ version: installed }),
      );
    }
    const npmLog = join(root, 'npm.log');
    const bin = binDir({ 'redis-server': 'exit 0', npm: recorder(npmLog) });
    return { root, npmLog, bin };
  }

  it('runs npm ci when node_modules is missing, and says why', async () => {
    const { root, npmLog, bin } = project(undefined);
    const run = await runSetup(join(root, 'scripts', 'setup.mjs'), ['demo'], { PATH: bin });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('installing dependencies with npm ci (node_modules is missing)');
    expect(readFileSync(npmLog, 'utf8').trim()).toBe('ci --no-audit --no-fund');
  });

  it('runs npm ci when an installed version differs from the lockfile', async () => {
    const { root, npmLog, bin } = project('1.2.0');
    const run = await runSetup(join(root, 'scripts', 'setup.mjs'), ['test'], { PATH: bin });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('(left-pad 1.2.0 is installed, package-lock.json has 1.3.0)');
    expect(readFileSync(npmLog, 'utf8').trim()).toBe('ci --no-audit --no-fund');
  });

  it('does nothing, quietly, when Redis and the dependencies are there', async () => {
    const { root, npmLog, bin } = project('1.3.0');
    const run = await runSetup(join(root, 'scripts', 'setup.mjs'), ['test'], { PATH: bin });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe('');
    expect(existsSync(npmLog)).toBe(false);
  });
});
