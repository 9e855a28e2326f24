import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';

// Runs the repository's .dependency-cruiser.mjs, through the same CLI as `npm run lint:layers`,
// on test/fixtures/layering: a miniature src/ whose files each say which of their imports a
// rule should refuse.
const root = fileURLToPath(new URL('../../', import.meta.url));
const fixture = join(root, 'test', 'fixtures', 'layering');
const configFile = join(root, '.dependency-cruiser.mjs');
const cli = join(root, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruise.mjs');

interface Violation {
  readonly type: string;
  readonly from: string;
  readonly to: string;
  readonly rule: { readonly name: string; readonly severity: string };
  readonly cycle?: readonly { readonly name: string }[];
}
interface Cruise {
  readonly modules: readonly {
    readonly source: string;
    readonly dependencies: readonly {
      readonly resolved: string;
      readonly dependencyTypes: readonly string[];
    }[];
  }[];
  readonly summary: { readonly violations: readonly Violation[]; readonly error: number };
}
interface Run {
  readonly exitCode: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs the CLI in the fixture directory, so its paths start with `src/` as the rules expect. */
function cruiseFixture(...extraArgs: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [cli, 'src', '--config', configFile, ...extraArgs],
      { cwd: fixture, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        // Exits with the number of errors found (with the default reporter, as lint:layers runs
        // it), so a non-zero exit is expected here.
        const exitCode = typeof error?.code === 'number' ? error.code : error ? -1 : 0;
        resolve({ exitCode, stdout, stderr });
      },
    );
  });
}

/** `rule: from -> to`; a cycle is named by its modules, whichever of them it was reported from. */
function describeViolation(violation: Violation): string {
  if (violation.type === 'cycle') {
    const members = new Set([violation.from, ...(violation.cycle ?? []).map((step) => step.name)]);
    return `${violation.rule.name}: ${[...members].sort().join(' <-> ')}`;
  }
  return `${violation.rule.name}: ${violation.from} -> ${violation.to}`;
}

const ALLOWED: readonly (readonly [from: string, to: string])[] = [
  ['src/cli/main.ts', 'src/index.ts'],
  ['src/cli/main.ts', 'src/keys.ts'],
  ['src/cli/main.ts', 'src/cli/render.ts'],
  ['src/index.ts', 'src/client.ts'],
  ['src/client.ts', 'src/engine/index.ts'],
  ['src/client.ts', 'src/primitives/lock/lock.ts'],
  ['src/client.ts', 'src/topology/standalone.ts'],
  ['src/primitives/lock/lock.ts', 'src/primitives/lock/protocol.ts'],
  ['src/primitives/lock/lock.ts', 'src/engine/index.ts'],
  ['src/primitives/lock/lock.ts', 'src/keys.ts'],
  ['src/primitives/fenced-lock/fenced-lock.ts', 'src/primitives/fenced-lock/protocol.ts'],
  ['src/primitives/fenced-lock/fenced-lock.ts', 'src/engine/index.ts'],
  ['src/redlock/redlock-lock.ts', 'src/engine/index.ts'],
  ['src/options.ts', 'src/errors.ts'],
  ['src/engine/index.ts', 'src/engine/acquire.ts'],
  ['src/engine/index.ts', 'src/engine/lease.ts'],
  ['src/engine/acquire.ts', 'src/topology/topology.ts'],
  ['src/engine/acquire.ts', 'src/errors.ts'],
  ['src/topology/standalone.ts', 'src/scripts/runner.ts'],
  ['src/topology/standalone.ts', 'src/redis/connection.ts'],
  ['src/scripts/runner.ts', 'src/redis/connection.ts'],
  ['src/redis/node-redis.ts', 'src/redis/connection.ts'],
  ['src/validate.ts', 'src/errors.ts'],
];

describe('layering rules (.dependency-cruiser.mjs)', () => {
  let cruise: Cruise;
  let plain: Run;
  beforeAll(async () => {
    const [json, text] = await Promise.all([cruiseFixture('--output-type', 'json'), cruiseFixture()]);
    try {
      cruise = JSON.parse(json.stdout) as Cruise;
    } catch {
      throw new Error(`dependency-cruiser printed no report (exit ${json.exitCode}): ${json.stderr}`);
    }
    plain = text;
  });

  it('reports each forbidden import of the fixture under its rule, and nothing else', () => {
    expect(cruise.summary.violations.map(describeViolation).sort()).toEqual(
      [
        'cli-on-top: src/redis-url.ts -> src/cli/main.ts',
        'cli-public-api: src/cli/render.ts -> src/engine/index.ts',
        'engine-one-door: src/redlock/redlock-lock.ts -> src/engine/lease.ts',
        'engine-not-above: src/engine/names-a-kind.ts -> src/primitives/lock/lock.ts',
        'engine-not-above: src/engine/names-a-kind.ts -> src/client.ts',
        'primitive-not-other-primitive: src/primitives/fenced-lock/fenced-lock.ts -> src/primitives/lock/lock.ts',
        'primitive-not-above: src/primitives/semaphore/semaphore.ts -> src/client.ts',
        'topology-not-above: src/topology/cluster.ts -> src/engine/index.ts',
        'redis-only-redis: src/redis/node-redis.ts -> src/errors.ts',
        'scripts-not-above: src/scripts/timeout-queue.ts -> src/topology/topology.ts',
        'leaf-not-above: src/validate.ts -> src/primitives/lock/lock.ts',
        'leaf-not-engine: src/keys.ts -> src/engine/index.ts',
        'no-circular: src/engine/hold.ts <-> src/engine/holds.ts',
        'src-imports-resolve: src/engine/unresolved.ts -> ./calls.js',
      ].sort(),
    );
    expect(cruise.summary.violations.every((v) => v.rule.severity === 'error')).toBe(true);
  });

  it('fails the run as lint:layers runs it: the exit code counts the errors', () => {
    expect(cruise.summary.error).toBe(cruise.summary.violations.length);
    expect(plain.exitCode).toBe(cruise.summary.error);
    for (const violation of cruise.summary.violations) {
      expect(plain.stdout).toContain(`error ${violation.rule.name}: ${violation.from}`);
    }
  });

  it('resolves `.js` imports to the .ts files and lets the allowed ones through', () => {
    const reported = new Set(cruise.summary.violations.map((v) => `${v.from} -> ${v.to}`));
    for (const [from, to] of ALLOWED) {
      const module = cruise.modules.find((m) => m.source === from);
      // Seen as an edge (so a rule could have refused it), not skipped as unresolvable.
      expect(
        module?.dependencies.map((d) => d.resolved),
        from,
      ).toContain(to);
      expect(reported.has(`${from} -> ${to}`), `${from} -> ${to}`).toBe(false);
    }
  });

  it('sees type-only imports, and marks them so', () => {
    const redlock = cruise.modules.find((m) => m.source === 'src/redlock/redlock-lock.ts');
    const lease = redlock?.dependencies.find((d) => d.resolved === 'src/engine/lease.ts');
    expect(lease?.dependencyTypes).toContain('type-only');
  });

  it('exercises every rule of the configuration', async () => {
    const config = (await import(pathToFileURL(configFile).href)) as {
      default: { forbidden: { name: string }[] };
    };
    const reportedRules = new Set(cruise.summary.violations.map((v) => v.rule.name));
    expect([...reportedRules].sort()).toEqual(config.default.forbidden.map((rule) => rule.name).sort());
  });
});
