// Least privilege and token hygiene: the whole integration suite passes while every latchkey
// command runs as an ACL user that has only what docs/semantics.md "Redis commands used" lists (0
// NOPERM), and no owner token (client id) shows up in its output, in any event latchkey
// emitted or in any error or abort reason it produced.
//
// The suite runs as a nested vitest process with acl.config.ts: its LockClients send their
// commands as the ACL user on the connections the tests give them, while the tests' own
// commands (HGETALL, CLIENT KILL, DEBUG ...) stay `default` (see fixtures/acl-latchkey.ts).
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { commandsFrom, monitorCommands, type CommandMonitor } from '../support/monitor.js';
import { startRedis, type RedisInstance } from '../support/redis-server.js';
import {
  ACL_SERVER_ENV,
  ACL_SETUSER,
  ACL_SETUSER_SUBCOMMANDS,
  CAPTURE_DIR_ENV,
  OWNER_FIELD,
  type AclCapture,
} from './fixtures/acl-user.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const VITEST = fileURLToPath(new URL('../../node_modules/vitest/vitest.mjs', import.meta.url));
const CONFIG = fileURLToPath(new URL('./acl.config.ts', import.meta.url));
const NESTED_TIMEOUT_MS = 900_000;
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;

interface NestedRun {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

interface JsonReport {
  readonly numTotalTests: number;
  readonly numPassedTests: number;
  readonly numFailedTests: number;
  readonly testResults: readonly {
    readonly name: string;
    readonly message?: string;
    readonly assertionResults: readonly { readonly fullName: string; readonly status: string }[];
  }[];
}

/** Runs the integration suite with acl.config.ts, in a process group of its own. */
function runNested(env: Record<string, string>): Promise<NestedRun> {
  const inherited = Object.fromEntries(
    // The outer vitest worker's own variables would confuse the nested vitest.
    Object.entries(process.env).filter(([name]) => !name.startsWith('VITEST')),
  );
  const child = spawn(process.execPath, [VITEST, 'run', '--config', CONFIG], {
    cwd: ROOT,
    env: { ...inherited, NO_COLOR: '1', FORCE_COLOR: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  return new Promise<NestedRun>((resolve, reject) => {
    const timer = setTimeout(() => {
      // The group holds its workers, their redis-servers and tsx fixtures too.
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      reject(new Error(`the nested integration run took over ${NESTED_TIMEOUT_MS} ms`));
    }, NESTED_TIMEOUT_MS);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** Output with every UUID masked, so a failure message cannot print an owner token. */
function masked(text: string): string {
  return text.replace(UUID, '<uuid>');
}

function occurrences(text: string, needle: string): number {
  let count = 0;
  for (let at = text.indexOf(needle); at !== -1; at = text.indexOf(needle, at + needle.length)) count += 1;
  return count;
}

/** Distinct lines with their counts, lock keys and UUIDs generalised, so a failure stays short. */
function tally(lines: readonly string[]): string[] {
  const counts = new Map<string, number>();
  for (const line of lines) {
    const general =
      masked(line)
        .replace(/\{[^}]*\}[^\s]*/g, '{…}')
        .split('\n')[0] ?? '';
    counts.set(general, (counts.get(general) ?? 0) + 1);
  }
  return [...counts].map(([line, count]) => `${count}× ${line}`).sort();
}

/** ACL LOG entries as `reason context object (user name)`. */
function aclLogEntries(reply: unknown): string[] {
  if (!Array.isArray(reply)) return [];
  return reply.map((entry: unknown) => {
    const fields = Array.isArray(entry) ? (entry as unknown[]) : [];
    const field = (name: string): string => {
      const value = fields[fields.indexOf(name) + 1];
      return typeof value === 'string' || typeof value === 'number' ? String(value) : '';
    };
    return `${field('reason')} ${field('context')} ${field('object')} (user ${field('username')})`;
  });
}

describe('least privilege', () => {
  let server: RedisInstance;
  let admin: ReturnType<typeof createClient>;
  let monitor: CommandMonitor;
  let dir: string;

  beforeAll(async () => {
    server = await startRedis();
    admin = createClient({ url: server.url });
    admin.on('error', () => {});
    await admin.connect();
    await admin.sendCommand([...ACL_SETUSER]);
    for (const args of ACL_SETUSER_SUBCOMMANDS) {
      // Older servers lack some subcommands (CLIENT SETINFO before 7.2); node-redis copes.
      await admin.sendCommand([...args]).catch(() => undefined);
    }
    monitor = await monitorCommands(server.url);
    dir = mkdtempSync(join(tmpdir(), 'latchkey-acl-'));
  });

  afterAll(async () => {
    await monitor?.stop();
    admin?.destroy();
    await server?.stop();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it('the integration suite passes as an ACL user with only the documented permissions, and no owner token shows', async () => {
    const reportPath = join(dir, 'report.json');
    const captureDir = join(dir, 'captures');
    const run = await runNested({
      REDIS_URL: server.url,
      [ACL_SERVER_ENV]: server.url,
      [CAPTURE_DIR_ENV]: captureDir,
      LATCHKEY_ACL_REPORT: reportPath,
    });
    const output = `${run.stdout}\n${run.stderr}`;

    let report: JsonReport | undefined;
    try {
      report = JSON.parse(readFileSync(reportPath, 'utf8')) as JsonReport;
    } catch {
      report = undefined;
    }
    const captures = readdirSync(captureDir)
      .filter((name) => name.endsWith('.json'))
      .map((name) => JSON.parse(readFileSync(join(captureDir, name), 'utf8')) as AclCapture);
    const sum = (pick: (capture: AclCapture) => number): number =>
      captures.reduce((total, capture) => total + pick(capture), 0);

    // Client ids: those the stand-in saw latchkey send, and those of worker processes, which
    // only MONITOR sees (every EVALSHA on this server is latchkey's or a replay of one).
    const clientIds = new Set(captures.flatMap((capture) => capture.clientIds));
    const fromCaptures = clientIds.size;
    for (const command of commandsFrom(monitor.lines, { excludeLua: true })) {
      if (command[0]?.toUpperCase() !== 'EVALSHA') continue;
      for (const arg of command.slice(2)) {
        for (const match of arg.matchAll(OWNER_FIELD)) if (match[1] !== undefined) clientIds.add(match[1]);
      }
    }
    const texts = captures.flatMap((capture) => capture.texts);
    const sources: Record<string, string> = {
      stdout: run.stdout,
      stderr: run.stderr,
      events: texts.filter((text) => text.startsWith('event ')).join('\n'),
      'errors and abort reasons': texts.filter((text) => !text.startsWith('event ')).join('\n'),
    };
    const tokenHits: string[] = [];
    for (const [source, text] of Object.entries(sources)) {
      const hits = [...clientIds].reduce((total, id) => total + occurrences(text, id), 0);
      if (hits > 0) tokenHits.push(`${hits} in ${source}`);
    }

    const failed = (report?.testResults ?? []).flatMap((file) => [
      ...(file.message ? [`${file.name}: ${file.message}`] : []),
      ...file.assertionResults.filter((test) => test.status === 'failed').map((test) => test.fullName),
    ]);
    const summary = {
      exit: { code: run.code, signal: run.signal },
      report: report === undefined ? 'missing' : 'read',
      failedTests: report?.numFailedTests,
      failed: failed.map(masked),
      nopermInOutput: occurrences(output, 'NOPERM'),
      nopermSeenByLatchkey: tally(captures.flatMap((capture) => capture.noperm)),
      aclLog: tally(aclLogEntries(await admin.sendCommand(['ACL', 'LOG', '1000']))),
      commandsThatFellBackToDefault: sum((capture) => capture.fallbacks),
      lockClientsNotAsAclUser: sum((capture) => capture.unlimited),
      tokenHits,
    };
    expect(summary, masked(output.slice(-6_000))).toEqual({
      exit: { code: 0, signal: null },
      report: 'read',
      failedTests: 0,
      failed: [],
      nopermInOutput: 0,
      nopermSeenByLatchkey: [],
      aclLog: [],
      commandsThatFellBackToDefault: 0,
      lockClientsNotAsAclUser: 0,
      tokenHits: [],
    });

    // The run really exercised what it claims to: many tests, many commands as the ACL user,
    // worker processes on the ACL user, owner fields to look for and texts to look in.
    expect(report?.numPassedTests).toBeGreaterThan(50);
    expect(captures.length).toBeGreaterThanOrEqual(10);
    expect(sum((capture) => capture.commandsAsUser)).toBeGreaterThan(1_000);
    expect(sum((capture) => capture.workers)).toBeGreaterThan(0);
    expect(fromCaptures).toBeGreaterThan(50);
    expect(clientIds.size).toBeGreaterThan(fromCaptures);
    expect(texts.some((text) => text.startsWith('event lockLost') && text.includes('LockLostError'))).toBe(
      true,
    );
    expect(
      texts.some((text) => text.startsWith('acquire rejected') && text.includes('LockTimeoutError')),
    ).toBe(true);
  }, 920_000);
});
