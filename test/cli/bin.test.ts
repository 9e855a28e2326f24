import { accessSync, constants, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { build, type Options } from 'tsup';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import tsupConfig from '../../tsup.config.js';
import { describeRun, jsonOf, PROJECT_ROOT, runCli } from '../support/cli.js';
import { sharedSuite } from '../support/shared-suite.js';
import { prefixOf } from './fixtures.js';

/** The entry of tsup.config.ts that builds the bin, as `npm run build` uses it. */
function cliBuild(): Options {
  const configs = Array.isArray(tsupConfig) ? tsupConfig : [tsupConfig];
  const found = configs.find(
    (config): config is Options =>
      typeof config === 'object' && typeof config.entry === 'object' && 'cli' in config.entry,
  );
  if (found === undefined) throw new Error('tsup.config.ts has no entry named cli');
  return found;
}

describe('the built latchkey bin', () => {
  const suite = sharedSuite('cli-bin');
  // Inside the project, so the built file resolves `redis` from its node_modules as an
  // installed package's bin does from the user's.
  let outDir = '';

  beforeAll(async () => {
    mkdirSync(join(PROJECT_ROOT, '.tmp'), { recursive: true });
    outDir = mkdtempSync(join(PROJECT_ROOT, '.tmp', 'cli-build-'));
    await build({ ...cliBuild(), outDir, config: false, silent: true, sourcemap: false });
  }, 60_000);

  afterAll(() => {
    if (outDir !== '') rmSync(outDir, { recursive: true, force: true });
  });

  it('is dist/cli.js, as package.json names it, executable and with a shebang', () => {
    const manifest = JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')) as {
      bin: Record<string, string>;
    };
    expect(manifest.bin).toEqual({ latchkey: './dist/cli.js' });
    const built = join(outDir, 'cli.js');
    expect(readFileSync(built, 'utf8').startsWith('#!/usr/bin/env node\n')).toBe(true);
    accessSync(built, constants.X_OK);
  });

  it('runs as an executable against a real server', async () => {
    const lock = suite.lockClient().fencedLock('ledger:7');
    const lease = await lock.acquire({ leaseMs: 20_000 });
    // Executed directly, as npm's link to it is: the shebang picks node.
    const run = await runCli(
      ['inspect', 'ledger:7', '--prefix', prefixOf(lock), '--url', suite.url, '--json'],
      {
        command: [join(outDir, 'cli.js')],
      },
    );
    expect(run.code, describeRun(run)).toBe(0);
    expect(jsonOf(run)).toMatchObject({ kind: 'fenced-lock', fencingToken: String(lease.token) });

    const version = await runCli(['--version'], { command: [join(outDir, 'cli.js')] });
    expect(version.stdout.trim()).toBe(
      (JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')) as { version: string }).version,
    );
  });
});
