// Entry of `npm run render` (in bench/; `npm run bench:render` from the root): writes the report
// (latest.md, latest.svg, the scaling charts) again from the latest.json of an earlier run, and
// profile.md from the profile.json of an earlier `npm run bench:profile` when there is one, so a
// change to the report or the charts needs no new run.
//   --out <dir>   the directory of that latest.json, where the report is written (default
//                 bench/results)
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Results } from './results-model.js';
import { writeProfileMarkdown, writeReport } from './report/write.js';

const args = process.argv.slice(2);
let out = join(dirname(fileURLToPath(import.meta.url)), 'results');
for (let i = 0; i < args.length; i += 1) {
  const value = args[i + 1];
  if (args[i] === '--out' && value !== undefined) {
    out = resolve(value);
    i += 1;
  } else {
    console.error(`unknown argument ${String(args[i])}; usage: npm run render [-- --out <dir>]`);
    process.exit(2);
  }
}
const results = JSON.parse(readFileSync(join(out, 'latest.json'), 'utf8')) as Results;
for (const path of [...writeReport(results, out), ...writeProfileMarkdown(out)]) console.log(`wrote ${path}`);
