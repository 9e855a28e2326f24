/**
 * Every example is where a newcomer looks for it: in the README's Examples table, in the demo's
 * list (so `npm run demo` runs it), and opening with a comment that says what it shows.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const read = (path: string): string => readFileSync(`${ROOT}${path}`, 'utf8');

/** examples/demo.ts runs the others; it is not one of them. */
const EXAMPLES = readdirSync(`${ROOT}examples`)
  .filter((file) => file.endsWith('.ts') && file !== 'demo.ts')
  .map((file) => file.slice(0, -'.ts'.length))
  .sort();

function examplesSection(readme: string): string {
  const start = readme.indexOf('\n## Examples\n');
  const end = readme.indexOf('\n## ', start + 1);
  return start === -1 ? '' : readme.slice(start, end === -1 ? undefined : end);
}

describe('examples', () => {
  it('there are examples to check', () => {
    expect(EXAMPLES.length).toBeGreaterThan(0);
  });

  it.each(EXAMPLES)('%s is linked from the README’s Examples table', (name) => {
    const section = examplesSection(read('README.md'));
    expect(section, 'README.md has no "## Examples" section').not.toBe('');
    expect(section).toContain(`[\`examples/${name}.ts\`](examples/${name}.ts)`);
  });

  it('the demo runs every example, and only those', () => {
    const listed = [...read('examples/demo.ts').matchAll(/^\s*\{?\s*name: '([\w-]+)'/gm)].map(
      (match) => match[1],
    );
    expect([...listed].sort()).toEqual(EXAMPLES);
  });

  it.each(EXAMPLES)('%s opens with a comment saying what it shows', (name) => {
    const source = read(`examples/${name}.ts`);
    const opening = /^\/\*\*\n \* (\S[^\n]+)\n/.exec(source);
    expect(opening, `examples/${name}.ts should open with a /** comment`).not.toBeNull();
    // A sentence, not a bare title.
    expect(opening?.[1]).toMatch(/^[A-Z].{20,}/);
  });
});
