/**
 * The programs tests start as child processes — worker fixtures and the `latchkey` CLI — built
 * once per test run into plain JavaScript, so that each start costs node's start-up and not
 * also tsx compiling the sources again: about 2 s of CPU per start, which on a busy two-core
 * machine is what made worker start-ups and CLI runs slow and their tests' margins thin.
 *
 * globalSetup builds them (esbuild, which tsx itself uses, so the code is the same) into a
 * directory of its own and names it in LATCHKEY_TEST_BUNDLES, which the test processes inherit.
 * Packages stay imports, resolved from the project's node_modules as before. Each file's
 * `import.meta.url` keeps naming the source file, so paths relative to it still resolve. Where
 * no bundle exists (a file run without globalSetup, a fixture added after the build) the
 * program starts through tsx, as before.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build, type Plugin } from 'esbuild';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** Where globalSetup put this run's bundles; inherited by the test processes. */
export const BUNDLES_ENV = 'LATCHKEY_TEST_BUNDLES';

/** The programs tests start: every worker fixture, and the CLI. */
const ENTRY_DIRS = ['test/support/fixtures', 'test/chaos/fixtures'];
const CLI_ENTRY = 'src/cli/main.ts';

/** `import.meta.url` (and `.dirname`, `.filename`) of each source file, not of the bundle. */
const sourceLocation: Plugin = {
  name: 'source-location',
  setup(plugin) {
    plugin.onLoad({ filter: /\.[cm]?ts$/ }, (args) => {
      const url = pathToFileURL(args.path).href;
      const contents = readFileSync(args.path, 'utf8')
        .replaceAll('import.meta.url', JSON.stringify(url))
        .replaceAll('import.meta.dirname', JSON.stringify(dirname(args.path)))
        .replaceAll('import.meta.filename', JSON.stringify(args.path));
      return { contents, loader: 'ts' };
    });
  },
};

function entryPoints(): string[] {
  const entries = [join(ROOT, CLI_ENTRY)];
  for (const dir of ENTRY_DIRS) {
    const folder = join(ROOT, dir);
    for (const name of readdirTs(folder)) entries.push(join(folder, name));
  }
  return entries;
}

/** The .ts files directly in `folder`: that is where fixtures live. */
function readdirTs(folder: string): string[] {
  if (!existsSync(folder)) return [];
  return readdirSync(folder).filter((name) => name.endsWith('.ts'));
}

/** Builds every bundle into `dir` (emptied first). */
export async function buildBundles(dir: string): Promise<void> {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  await build({
    entryPoints: entryPoints(),
    outbase: ROOT,
    outdir: dir,
    outExtension: { '.js': '.mjs' },
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    // The sources' own tsconfig, for the same decorators and class fields as tsx gives them.
    tsconfig: join(ROOT, 'tsconfig.json'),
    plugins: [sourceLocation],
    logLevel: 'warning',
  });
}

/** The bundle of `scriptPath` (a .ts file of the project) built for this run, if there is one. */
export function bundleOf(scriptPath: string): string | undefined {
  const dir = process.env[BUNDLES_ENV];
  if (dir === undefined || dir === '') return undefined;
  const path = join(dir, relative(ROOT, resolve(ROOT, scriptPath)).replace(/\.ts$/, '.mjs'));
  return existsSync(path) ? path : undefined;
}

/** node's arguments that run `scriptPath`: its bundle, or the source through tsx. */
export function nodeArgsFor(scriptPath: string): string[] {
  const bundle = bundleOf(scriptPath);
  return bundle === undefined ? ['--import', 'tsx', resolve(ROOT, scriptPath)] : [bundle];
}

/** Whether `path` is one of this run's bundles. */
export function isBundle(path: string): boolean {
  const dir = process.env[BUNDLES_ENV];
  return dir !== undefined && dir !== '' && resolve(path).startsWith(resolve(dir) + sep);
}
