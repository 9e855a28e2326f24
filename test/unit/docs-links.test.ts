/**
 * The README, the pages in docs/ and the changelogs link to each other and into the
 * repository: every relative link must reach a file that exists and, when it names a
 * #fragment, a heading of that file, by the anchors GitHub gives headings. The README stays a
 * front page of at most 600 lines.
 */
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const README_MAX_LINES = 600;

const DOCS = readdirSync(join(ROOT, 'docs'))
  .filter((file) => file.endsWith('.md'))
  .sort()
  .map((file) => `docs/${file}`);
/** The changelogs link into docs/ too. */
const PAGES = ['README.md', ...DOCS, 'CHANGELOG.md', 'bench/CHANGELOG.md'];

/** The text outside fenced code blocks, one entry per line (fenced lines become empty). */
function proseLines(markdown: string): string[] {
  let fence: string | undefined;
  return markdown.split('\n').map((line) => {
    const marker = /^\s*(```|~~~)/.exec(line)?.[1];
    if (marker !== undefined && (fence === undefined || fence === marker)) {
      fence = fence === undefined ? marker : undefined;
      return '';
    }
    return fence === undefined ? line : '';
  });
}

/**
 * GitHub's anchor for a heading: its text as rendered (no code marks, link targets or tags),
 * lower case, without punctuation other than hyphens and underscores, spaces as hyphens; a
 * repeated anchor gets -1, -2, ...
 */
function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of proseLines(markdown)) {
    const heading = /^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const text = heading
      .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
      .replace(/<[^>]+>/g, '')
      .replace(/`/g, '');
    const slug = text
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}_\- ]/gu, '')
      .replace(/ /g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

/** Every link target in the prose: inline links, images and reference definitions. */
function linkTargets(markdown: string): string[] {
  const targets: string[] = [];
  for (const line of proseLines(markdown)) {
    const prose = line.replace(/`[^`]*`/g, '``');
    for (const match of prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      targets.push(match[1] ?? '');
    }
    const definition = /^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$/.exec(prose)?.[1];
    if (definition !== undefined) targets.push(definition);
  }
  return targets;
}

/** What is wrong with each relative link of `page` (a path under `root`); empty when none is. */
function brokenLinks(root: string, page: string): string[] {
  const problems: string[] = [];
  const markdown = readFileSync(join(root, page), 'utf8');
  for (const target of linkTargets(markdown)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//')) continue;
    const hashAt = target.indexOf('#');
    const pathPart = hashAt === -1 ? target : target.slice(0, hashAt);
    const fragment = hashAt === -1 ? undefined : decodeURIComponent(target.slice(hashAt + 1));
    const file =
      pathPart === '' ? page : relative(root, join(root, dirname(page), decodeURIComponent(pathPart)));
    if (file.startsWith('..')) {
      problems.push(`${target}: leaves the repository`);
      continue;
    }
    if (!existsSync(join(root, file))) {
      problems.push(`${target}: ${file} does not exist`);
      continue;
    }
    if (fragment === undefined) continue;
    if (!file.endsWith('.md') || statSync(join(root, file)).isDirectory()) {
      problems.push(`${target}: a #fragment into ${file}, which has no headings to check it against`);
      continue;
    }
    if (!headingAnchors(readFileSync(join(root, file), 'utf8')).has(fragment.toLowerCase())) {
      problems.push(`${target}: ${file} has no heading with the anchor #${fragment}`);
    }
  }
  return problems;
}

describe('links in the README, docs/ and the changelogs', () => {
  it('there are pages in docs/ to check', () => {
    expect(DOCS.length).toBeGreaterThan(0);
  });

  it.each(PAGES)('every relative link of %s reaches a file and a heading', (page) => {
    expect(linkTargets(readFileSync(join(ROOT, page), 'utf8')).length).toBeGreaterThan(0);
    expect(brokenLinks(ROOT, page)).toEqual([]);
  });

  it.each(DOCS)('%s opens with what it covers and a link back to the README', (page) => {
    const [title, blank, statement] = readFileSync(join(ROOT, page), 'utf8').split('\n');
    expect(title).toMatch(/^# \S/);
    expect(blank).toBe('');
    expect(statement).toMatch(/^[A-Za-z`].{20,}\[README\]\(\.\.\/README\.md\)\.$/);
  });

  it(`the README is a front page of at most ${README_MAX_LINES} lines`, () => {
    const lines = readFileSync(join(ROOT, 'README.md'), 'utf8').trimEnd().split('\n').length;
    expect(lines).toBeLessThanOrEqual(README_MAX_LINES);
  });
});

describe('the link check itself', () => {
  const fixture = mkdtempSync(join(tmpdir(), 'latchkey-docs-links-'));
  afterAll(() => rmSync(fixture, { recursive: true, force: true }));
  mkdirSync(join(fixture, 'docs'));
  writeFileSync(join(fixture, 'code.ts'), 'export const answer = 42;\n');
  writeFileSync(join(fixture, 'docs/other.md'), '# Other\n\n## A heading\n');
  writeFileSync(
    join(fixture, 'docs/page.md'),
    [
      '# Page',
      '',
      'Fine: [other](other.md), [its heading](other.md#a-heading), [here](#page), [code](../code.ts).',
      'Broken: [gone](../missing.md), [no heading](other.md#no-such-heading), [nor here](#nor-this-one),',
      'and [a line of code](../code.ts#L3).',
    ].join('\n'),
  );

  it('gives headings the anchors GitHub gives them', () => {
    const anchors = headingAnchors(
      [
        '# `Lock` — reentrant',
        '## Redlock, synchronous replicas or fencing?',
        '## Events',
        '## Events',
        '```sh',
        '# a shell comment, not a heading',
        '```',
        '### [Linked](https://example.com) heading_with_underscore',
      ].join('\n'),
    );
    expect([...anchors].sort()).toEqual(
      [
        'lock--reentrant',
        'redlock-synchronous-replicas-or-fencing',
        'events',
        'events-1',
        'linked-heading_with_underscore',
      ].sort(),
    );
  });

  it('finds inline links, images and reference definitions, not links inside code', () => {
    expect(
      linkTargets(
        [
          'See [the kinds](docs/kinds.md#lock-kinds) and ![chart](bench/results/latest.svg).',
          '`[not a link](nowhere.md)`',
          '```md',
          '[not a link either](nowhere.md)',
          '```',
          '[redlock]: https://github.com/mike-marcacci/node-redlock',
        ].join('\n'),
      ),
    ).toEqual([
      'docs/kinds.md#lock-kinds',
      'bench/results/latest.svg',
      'https://github.com/mike-marcacci/node-redlock',
    ]);
  });

  it('reports a missing file, a missing heading and a fragment it cannot check', () => {
    expect(brokenLinks(fixture, 'docs/page.md')).toEqual([
      '../missing.md: missing.md does not exist',
      'other.md#no-such-heading: docs/other.md has no heading with the anchor #no-such-heading',
      '#nor-this-one: docs/page.md has no heading with the anchor #nor-this-one',
      '../code.ts#L3: a #fragment into code.ts, which has no headings to check it against',
    ]);
  });
});
