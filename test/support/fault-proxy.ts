/**
 * A TCP proxy between Redis clients and a Redis server that injects network faults, so tests
 * can break the network between one client and the server while other connections (an
 * observer, an admin client) reach the server directly and see what really happens there.
 *
 * Every accepted connection gets a connection of its own to the target; bytes are relayed in
 * both directions, in order, with backpressure (a destination that stops draining pauses
 * reading from its source, so memory stays bounded and the sender's writes back up).
 *
 * What each fault models:
 *
 * - setLatency(ms): a slow or congested link. Every chunk is delivered `ms` after the proxy
 *   read it, in each direction (a round trip gains 2 * ms). Order is preserved: a chunk is
 *   never delivered before one read earlier, even when the latency is lowered meanwhile.
 *
 * - blackhole(true): a network partition. Connections stay open, neither end sees FIN or
 *   RST, and nothing gets through either way; connections accepted meanwhile are held the
 *   same way. The proxy HOLDS the bytes rather than dropping them, and delivers them in
 *   order when the blackhole is lifted. A real partition drops packets, but TCP retransmits
 *   them, so what each end's byte stream sees is exactly this: a stall, then everything sent
 *   meanwhile arrives late, including requests the sender has given up on (a timed-out
 *   command still runs on the server). Dropping bytes from the middle of a stream would
 *   desynchronise the RESP framing, which no network does to a live TCP connection. Held
 *   bytes count toward backpressure, so a long partition stops reading from senders, as a
 *   full TCP window would.
 *
 * - resetAll(): connections torn down abruptly (a middlebox or the server's host dropping
 *   state, a crashed peer's kernel answering with RST). Both sides of every proxied
 *   connection are destroyed with RST; bytes held or in flight are lost. The proxy keeps
 *   accepting, so clients can reconnect at once (unless a blackhole holds their traffic).
 *
 * Socket errors are handled per connection (the pair is torn down); none escapes as an
 * unhandled 'error' event.
 */
import { createServer, connect as netConnect, type AddressInfo, type Server, type Socket } from 'node:net';

export interface FaultProxyOptions {
  readonly targetHost: string;
  readonly targetPort: number;
  /** Host the proxy listens on; default 127.0.0.1. */
  readonly listenHost?: string;
}

export interface FaultProxy {
  /** redis://host:port of the proxy. */
  readonly url: string;
  readonly host: string;
  readonly port: number;
  /** Delay every chunk by `ms` in each direction (0: none). Applies to data read from now on. */
  setLatency(ms: number): void;
  /** Holds all traffic (true) or delivers what was held and resumes relaying (false). */
  blackhole(on: boolean): void;
  /** Destroys every proxied connection with RST on both sides; returns how many there were. */
  resetAll(): number;
  /**
   * Sends connections accepted from now on to another server; open ones stay where they are. With
   * resetAll(), a client that reconnects by the same address reaches another node, as after a
   * failover behind a fixed address.
   */
  retarget(host: string, port: number): void;
  /** Proxied connections currently open. */
  readonly connectionCount: number;
  /** Connections accepted since the proxy started. */
  readonly acceptedCount: number;
  /** Stops accepting and destroys every proxied connection. Safe to call twice. */
  close(): Promise<void>;
}

// Bytes held in one direction before the proxy stops reading from the source.
const HIGH_WATER_BYTES = 1 << 20;
const LOW_WATER_BYTES = 1 << 18;

interface Queued {
  readonly chunk: Buffer;
  readonly dueAt: number;
}

interface ProxyState {
  latencyMs: number;
  blackholed: boolean;
  /** Where connections accepted from now on go. */
  targetHost: string;
  targetPort: number;
}

/** One direction of a proxied connection: source -> (delay, hold) -> destination. */
class Relay {
  readonly #from: Socket;
  readonly #to: Socket;
  readonly #state: ProxyState;
  readonly #queue: Queued[] = [];
  #queuedBytes = 0;
  #lastDueAt = 0;
  #timer: NodeJS.Timeout | undefined;
  #awaitingDrain = false;
  #sourceEnded = false;
  #stopped = false;

  constructor(from: Socket, to: Socket, state: ProxyState) {
    this.#from = from;
    this.#to = to;
    this.#state = state;
    from.on('data', (chunk: Buffer) => this.#onData(chunk));
    from.on('end', () => {
      this.#sourceEnded = true;
      this.pump();
    });
  }

  #onData(chunk: Buffer): void {
    if (this.#stopped) return;
    // Never earlier than the chunk before it: lowering the latency must not reorder bytes.
    const dueAt = Math.max(this.#lastDueAt, performance.now() + this.#state.latencyMs);
    this.#lastDueAt = dueAt;
    this.#queue.push({ chunk, dueAt });
    this.#queuedBytes += chunk.length;
    if (this.#queuedBytes >= HIGH_WATER_BYTES) this.#from.pause();
    this.pump();
  }

  /** Delivers every chunk that is due, unless held; plans the next delivery. */
  pump(): void {
    if (this.#stopped || this.#awaitingDrain || this.#state.blackholed) return;
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    const now = performance.now();
    while (this.#queue.length > 0) {
      const head = this.#queue[0];
      if (head === undefined || head.dueAt > now) break;
      this.#queue.shift();
      this.#queuedBytes -= head.chunk.length;
      if (!this.#to.write(head.chunk)) {
        this.#awaitingDrain = true;
        this.#to.once('drain', () => {
          this.#awaitingDrain = false;
          this.pump();
        });
        break;
      }
    }
    if (this.#queuedBytes <= LOW_WATER_BYTES && this.#from.isPaused() && !this.#awaitingDrain) {
      this.#from.resume();
    }
    const head = this.#queue[0];
    if (head !== undefined) {
      if (!this.#awaitingDrain) {
        this.#timer = setTimeout(
          () => {
            this.#timer = undefined;
            this.pump();
          },
          Math.max(0, head.dueAt - now),
        );
      }
    } else if (this.#sourceEnded && !this.#awaitingDrain) {
      // Half-close passes through once everything before it was delivered.
      this.#to.end();
    }
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#queue.length = 0;
    this.#queuedBytes = 0;
  }
}

class Connection {
  readonly #client: Socket;
  readonly #upstream: Socket;
  readonly #relays: Relay[];
  #closed = false;
  readonly #onClosed: (connection: Connection) => void;

  constructor(client: Socket, state: ProxyState, onClosed: (c: Connection) => void) {
    this.#client = client;
    this.#onClosed = onClosed;
    this.#upstream = netConnect({ host: state.targetHost, port: state.targetPort, allowHalfOpen: true });
    client.setNoDelay(true);
    this.#upstream.setNoDelay(true);
    this.#relays = [new Relay(client, this.#upstream, state), new Relay(this.#upstream, client, state)];
    // An error on one side is passed on as it would be by the network: abruptly.
    client.on('error', () => this.reset());
    this.#upstream.on('error', () => this.reset());
    client.on('close', () => this.#closeBoth());
    this.#upstream.on('close', () => this.#closeBoth());
  }

  pump(): void {
    for (const relay of this.#relays) relay.pump();
  }

  /** Both sides destroyed with RST. */
  reset(): void {
    this.#finish();
    for (const socket of [this.#client, this.#upstream]) {
      if (socket.destroyed) continue;
      try {
        socket.resetAndDestroy();
      } catch {
        // Not connected yet, so there is nothing to reset: a plain destroy does.
        socket.destroy();
      }
    }
  }

  #closeBoth(): void {
    this.#finish();
    if (!this.#client.destroyed) this.#client.destroy();
    if (!this.#upstream.destroyed) this.#upstream.destroy();
  }

  #finish(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const relay of this.#relays) relay.stop();
    this.#onClosed(this);
  }
}

/** Starts a proxy to `targetHost:targetPort` on a free loopback port. */
export async function startFaultProxy(options: FaultProxyOptions): Promise<FaultProxy> {
  const state: ProxyState = {
    latencyMs: 0,
    blackholed: false,
    targetHost: options.targetHost,
    targetPort: options.targetPort,
  };
  const connections = new Set<Connection>();
  let accepted = 0;
  let closing: Promise<void> | undefined;

  const server: Server = createServer({ allowHalfOpen: true, pauseOnConnect: false }, (client) => {
    if (closing !== undefined) {
      client.destroy();
      return;
    }
    accepted += 1;
    connections.add(new Connection(client, state, (c) => connections.delete(c)));
  });
  server.on('error', () => {
    // Listen errors surface through the listen() promise below; nothing else is expected.
  });
  const listenHost = options.listenHost ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, listenHost, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;

  return {
    url: `redis://${listenHost}:${port}`,
    host: listenHost,
    port,
    setLatency(ms: number): void {
      if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`latency must be >= 0 ms, got ${ms}`);
      state.latencyMs = ms;
    },
    blackhole(on: boolean): void {
      state.blackholed = on;
      if (!on) for (const connection of connections) connection.pump();
    },
    retarget(host: string, port: number): void {
      state.targetHost = host;
      state.targetPort = port;
    },
    resetAll(): number {
      const all = [...connections];
      for (const connection of all) connection.reset();
      return all.length;
    },
    get connectionCount(): number {
      return connections.size;
    },
    get acceptedCount(): number {
      return accepted;
    },
    close(): Promise<void> {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const connection of [...connections]) connection.reset();
      });
      return closing;
    },
  };
}
