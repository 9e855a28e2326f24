// A counting TCP proxy in front of Redis: every request a client sends is parsed just enough to
// count it (and name it), then forwarded unchanged. Used for the round-trip passes instead of
// MONITOR, and to tell the holder's calls from the waiters' (one proxy each).
import { connect, createServer, type Server, type Socket } from 'node:net';

export type Counts = ReadonlyMap<string, number>;

const CR = 13;

/** Incremental parser of RESP requests (arrays of bulk strings, or inline commands). */
class RequestParser {
  #pending: Buffer = Buffer.alloc(0);

  constructor(private readonly onCommand: (name: string) => void) {}

  push(chunk: Buffer): void {
    const buffer = this.#pending.length === 0 ? chunk : Buffer.concat([this.#pending, chunk]);
    let pos = 0;
    for (;;) {
      const next = this.#parseOne(buffer, pos);
      if (next < 0) break;
      pos = next;
    }
    this.#pending = pos >= buffer.length ? Buffer.alloc(0) : buffer.subarray(pos);
  }

  /** Parses one request at `pos`; returns the position after it, or -1 when incomplete. */
  #parseOne(buffer: Buffer, pos: number): number {
    if (pos >= buffer.length) return -1;
    const lineEnd = buffer.indexOf(CR, pos);
    if (lineEnd < 0 || lineEnd + 1 >= buffer.length) return -1;
    if (buffer[pos] !== 0x2a /* '*' */) {
      const words = buffer.toString('latin1', pos, lineEnd).trim().split(/\s+/);
      if (words[0] !== undefined && words[0] !== '') this.onCommand(words[0].toUpperCase());
      return lineEnd + 2;
    }
    const count = Number(buffer.toString('latin1', pos + 1, lineEnd));
    let at = lineEnd + 2;
    const head: string[] = [];
    for (let i = 0; i < count; i += 1) {
      const sizeEnd = buffer.indexOf(CR, at);
      if (sizeEnd < 0 || sizeEnd + 1 >= buffer.length) return -1;
      const size = Number(buffer.toString('latin1', at + 1, sizeEnd));
      const start = sizeEnd + 2;
      if (start + size + 2 > buffer.length) return -1;
      if (i < 2) head.push(buffer.toString('latin1', start, start + size));
      at = start + size + 2;
    }
    const name = (head[0] ?? '').toUpperCase();
    // Scripts are told apart by their SHA1 (first 8 hex digits).
    this.onCommand(name === 'EVALSHA' && head[1] !== undefined ? `EVALSHA:${head[1].slice(0, 8)}` : name);
    return at;
  }
}

export class CountingProxy {
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  #counts = new Map<string, number>();
  port = 0;

  private constructor(upstreamHost: string, upstreamPort: number) {
    this.#server = createServer((client) => {
      const upstream = connect(upstreamPort, upstreamHost);
      client.setNoDelay(true);
      upstream.setNoDelay(true);
      this.#sockets.add(client);
      this.#sockets.add(upstream);
      const parser = new RequestParser((name) => {
        this.#counts.set(name, (this.#counts.get(name) ?? 0) + 1);
      });
      client.on('data', (chunk: Buffer) => {
        upstream.write(chunk);
        parser.push(chunk);
      });
      upstream.pipe(client);
      const end = (): void => {
        client.destroy();
        upstream.destroy();
        this.#sockets.delete(client);
        this.#sockets.delete(upstream);
      };
      client.on('close', end);
      upstream.on('close', end);
      client.on('error', end);
      upstream.on('error', end);
    });
  }

  static async start(upstreamUrl: string): Promise<CountingProxy> {
    const url = new URL(upstreamUrl);
    const proxy = new CountingProxy(url.hostname, Number(url.port));
    await new Promise<void>((resolve, reject) => {
      proxy.#server.once('error', reject);
      proxy.#server.listen(0, '127.0.0.1', () => resolve());
    });
    const address = proxy.#server.address();
    proxy.port = typeof address === 'object' && address !== null ? address.port : 0;
    return proxy;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Counts by command name since the last call, and starts counting afresh. */
  take(): Counts {
    const counts = this.#counts;
    this.#counts = new Map();
    return counts;
  }

  async stop(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

export function totalOf(counts: Counts): number {
  let total = 0;
  for (const value of counts.values()) total += value;
  return total;
}
