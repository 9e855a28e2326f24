/**
 * MONITOR over a raw socket, so tests can count the commands a client really sends
 * (e.g. "one EVALSHA per acquire, no polling"). A raw socket rather than node-redis keeps
 * the monitor connection independent of the client under test.
 */
import { createConnection, type Socket } from 'node:net';

export interface CommandMonitor {
  /** Every monitor line so far, without the leading '+'. */
  readonly lines: string[];
  /** Resolves once `predicate(lines)` holds; MONITOR output trails the replies a bit. */
  waitFor(predicate: (lines: readonly string[]) => boolean, timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

const CONNECT_TIMEOUT_MS = 5_000;
const DEFAULT_WAIT_MS = 5_000;

function encodeCommand(args: readonly string[]): string {
  return `*${args.length}\r\n${args.map((arg) => `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`).join('')}`;
}

function authCommand(url: URL): string[] | undefined {
  const password = decodeURIComponent(url.password);
  const username = decodeURIComponent(url.username);
  if (password === '' && username === '') return undefined;
  return username === '' ? ['AUTH', password] : ['AUTH', username, password];
}

/**
 * Connects to `url`, issues MONITOR and resolves once the server has confirmed it, so every
 * command sent after the promise resolves is seen.
 */
export async function monitorCommands(url: string): Promise<CommandMonitor> {
  const parsed = new URL(url);
  if (parsed.protocol !== 'redis:') {
    throw new Error(`monitorCommands supports redis:// URLs only, got ${parsed.protocol}`);
  }
  const host = parsed.hostname === '' ? '127.0.0.1' : parsed.hostname.replace(/^\[|\]$/g, '');
  const port = parsed.port === '' ? 6379 : Number(parsed.port);
  const auth = authCommand(parsed);

  const socket: Socket = createConnection({ host, port });
  socket.setNoDelay(true);
  const lines: string[] = [];
  const listeners = new Set<() => void>();
  let buffered = '';
  // Replies to AUTH and MONITOR come before the first monitor line.
  let pendingReplies = auth === undefined ? 1 : 2;

  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`MONITOR on ${host}:${port} was not confirmed within ${CONNECT_TIMEOUT_MS} ms`));
    }, CONNECT_TIMEOUT_MS);
    const fail = (error: Error): void => {
      clearTimeout(timer);
      socket.destroy();
      reject(error);
    };
    socket.once('error', fail);
    socket.on('connect', () => {
      socket.write((auth === undefined ? '' : encodeCommand(auth)) + encodeCommand(['MONITOR']));
    });
    socket.on('data', (chunk: Buffer) => {
      // latin1 keeps one char per byte; MONITOR escapes non-printable bytes anyway.
      buffered += chunk.toString('latin1');
      let end = buffered.indexOf('\r\n');
      while (end !== -1) {
        const line = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        end = buffered.indexOf('\r\n');
        if (pendingReplies > 0) {
          if (line.startsWith('-')) {
            fail(new Error(`MONITOR on ${host}:${port} was refused: ${line.slice(1)}`));
            return;
          }
          pendingReplies -= 1;
          if (pendingReplies === 0) {
            clearTimeout(timer);
            socket.removeListener('error', fail);
            resolve();
          }
          continue;
        }
        lines.push(line.startsWith('+') ? line.slice(1) : line);
      }
      for (const listener of listeners) listener();
    });
  });
  // After start-up a broken monitor connection only means fewer lines; the test's own
  // assertions will say so. An unhandled 'error' would crash the test process instead.
  socket.on('error', () => {});

  return {
    lines,
    waitFor(predicate, timeoutMs = DEFAULT_WAIT_MS): Promise<void> {
      if (predicate(lines)) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        const check = (): void => {
          if (!predicate(lines)) return;
          clearTimeout(timer);
          listeners.delete(check);
          resolve();
        };
        const timer = setTimeout(() => {
          listeners.delete(check);
          reject(
            new Error(
              `monitor condition not met within ${timeoutMs} ms; last lines:\n${lines.slice(-20).join('\n')}`,
            ),
          );
        }, timeoutMs);
        listeners.add(check);
      });
    },
    stop(): Promise<void> {
      if (socket.destroyed) return Promise.resolve();
      return new Promise<void>((resolve) => {
        socket.once('close', () => resolve());
        socket.destroy();
      });
    },
  };
}

const SIMPLE_ESCAPES: Readonly<Record<string, string>> = {
  n: '\n',
  r: '\r',
  t: '\t',
  a: '\x07',
  b: '\b',
  '"': '"',
  '\\': '\\',
};

/** Splits the argument part of a monitor line (`"SET" "k" "v"`) into unescaped strings. */
function parseQuotedArgs(text: string): string[] {
  const args: string[] = [];
  let i = 0;
  while (i < text.length) {
    if (text[i] !== '"') {
      i += 1;
      continue;
    }
    i += 1;
    let arg = '';
    while (i < text.length && text[i] !== '"') {
      const ch = text[i] ?? '';
      if (ch !== '\\') {
        arg += ch;
        i += 1;
        continue;
      }
      const next = text[i + 1] ?? '';
      const hex = text.slice(i + 2, i + 4);
      if (next === 'x' && /^[0-9a-fA-F]{2}$/.test(hex)) {
        // Bytes come back as one latin1 char each; good enough to compare with ASCII.
        arg += String.fromCharCode(Number.parseInt(hex, 16));
        i += 4;
      } else {
        arg += SIMPLE_ESCAPES[next] ?? next;
        i += 2;
      }
    }
    args.push(arg);
    i += 1;
  }
  return args;
}

// `<unix time> [<db> <addr>] "arg" ...`; addr is `lua` for commands run by a script.
const LINE = /^\S+ \[\d+ ([^\]]+)\] (.*)$/;

/**
 * Parses monitor lines into argument arrays. `excludeLua` drops commands issued from inside
 * scripts; `clientAddr` keeps only the commands of one connection (see clientAddr()).
 */
export function commandsFrom(
  lines: readonly string[],
  opts: { excludeLua?: boolean; clientAddr?: string } = {},
): string[][] {
  const commands: string[][] = [];
  for (const line of lines) {
    const match = LINE.exec(line);
    const addr = match?.[1];
    const rest = match?.[2];
    if (addr === undefined || rest === undefined) continue;
    if (opts.excludeLua === true && addr === 'lua') continue;
    if (opts.clientAddr !== undefined && addr !== opts.clientAddr) continue;
    commands.push(parseQuotedArgs(rest));
  }
  return commands;
}

/** The `ip:port` under which the server knows `client`'s connection, as MONITOR prints it. */
export async function clientAddr(client: { sendCommand(args: string[]): Promise<unknown> }): Promise<string> {
  const reply = await client.sendCommand(['CLIENT', 'INFO']);
  const text = Buffer.isBuffer(reply) ? reply.toString('utf8') : String(reply);
  const match = /(?:^|\s)addr=(\S+)/.exec(text);
  const addr = match?.[1];
  if (addr === undefined) throw new Error(`CLIENT INFO reply has no addr= field: ${text}`);
  return addr;
}
