/**
 * A replicated Redis for tests: one master, two replicas (`--replicaof`) and three sentinels
 * (`redis-server <conf> --sentinel`, quorum 2) on free loopback ports, in temp dirs, removed by
 * `stop()`. Sentinel's timings are short, so a killed master is replaced within about 2-4 s (shorter detection flaps on a loaded machine).
 *
 * Faults are real: `killMaster()` is kill -9 of the current master's process; `pause()` is
 * SIGSTOP of a node. A killed node comes back (`revive`) as a replica of the current master.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient } from 'redis';
import { onProcessExit } from './cleanup.js';

export const MASTER_NAME = 'latchkey';
const LOOPBACK = '127.0.0.1';

/** How quickly sentinels see a dead master and how long one failover attempt may take. */
const DOWN_AFTER_MS = 1_000;
const FAILOVER_TIMEOUT_MS = 3_000;

/** Runs `action`, ignoring what it throws (destroying a client that never connected throws). */
function quietly(action: () => unknown): void {
  try {
    action();
  } catch {
    // Nothing to clean up.
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

const usedPorts = new Set<number>();

/** A loopback port the kernel says is free, not handed out before by this process. */
async function freePort(): Promise<number> {
  for (let i = 0; i < 50; i += 1) {
    const port = await new Promise<number>((resolve, reject) => {
      const server = createServer();
      server.once('error', reject);
      server.listen(0, LOOPBACK, () => {
        const address = server.address();
        server.close(() => {
          if (address !== null && typeof address === 'object') resolve(address.port);
          else reject(new Error('no port'));
        });
      });
    });
    if (!usedPorts.has(port)) {
      usedPorts.add(port);
      return port;
    }
  }
  throw new Error('no free loopback port');
}

/** One redis-server process (data node or sentinel). */
export class Node {
  readonly port: number;
  readonly dir: string;
  readonly #args: (replicaOf: number | undefined) => string[];
  #child: ChildProcess | undefined;
  #exited: Promise<void> = Promise.resolve();

  constructor(port: number, dir: string, args: (replicaOf: number | undefined) => string[]) {
    this.port = port;
    this.dir = dir;
    this.#args = args;
  }

  get running(): boolean {
    return this.#child !== undefined;
  }

  get pid(): number | undefined {
    return this.#child?.pid;
  }

  /** Starts the process (as a replica of `replicaOf`, for a data node) and waits for PING. */
  async start(replicaOf?: number): Promise<void> {
    const child = spawn('redis-server', this.#args(replicaOf), { cwd: this.dir, stdio: 'ignore' });
    this.#child = child;
    this.#exited = new Promise((resolve) => child.once('exit', () => resolve()));
    child.once('exit', () => {
      if (this.#child === child) this.#child = undefined;
    });
    const deadline = Date.now() + 10_000;
    for (;;) {
      const client = createClient({ socket: { host: LOOPBACK, port: this.port, reconnectStrategy: false } });
      client.on('error', () => undefined);
      try {
        await client.connect();
        await client.ping();
        await client.close();
        return;
      } catch {
        quietly(() => client.destroy());
        if (Date.now() > deadline || this.#child !== child) {
          throw new Error(`redis-server on port ${this.port} did not start`);
        }
        await delay(50);
      }
    }
  }

  /** kill -9, and wait until the process is gone. */
  async kill(): Promise<void> {
    const child = this.#child;
    if (child === undefined) return;
    child.kill('SIGKILL');
    await this.#exited;
  }

  pause(): void {
    this.#child?.kill('SIGSTOP');
  }

  resume(): void {
    this.#child?.kill('SIGCONT');
  }
}

export interface Replicated {
  /** The three data nodes; which one is master changes with failovers. */
  readonly nodes: readonly Node[];
  readonly sentinels: readonly Node[];
  /** `createSentinel`'s `sentinelRootNodes`. */
  readonly sentinelRootNodes: readonly { host: string; port: number }[];
  /** The master's port as the sentinels report it (a majority of those that answer). */
  masterPort(): Promise<number>;
  /** The data node that is master now. */
  master(): Promise<Node>;
  /** The running data nodes that are not the master. */
  replicas(): Promise<Node[]>;
  /**
   * kill -9 of the current master; resolves once the sentinels named another master and it
   * answers as one. Then the killed node is started again as its replica (it keeps no data).
   */
  failover(options?: {
    /** Start the killed node again as a replica once the new master is up (default true). */
    readonly revive?: boolean;
    /** Runs right after the kill, before the sentinels react (e.g. to resume paused replicas). */
    readonly afterKill?: () => void;
  }): Promise<{ readonly from: number; readonly to: number }>;
  /** Starts every killed data node again as a replica of the master, and waits for them to sync. */
  revive(): Promise<void>;
  /**
   * Resolves once the sentinels agree on a master that every other running data node replicates,
   * and those replicas have acknowledged every write made on it so far (WAIT). On a busy machine
   * the sentinels may elect again on their own (a missed ping): a test that kills the master to
   * see what a client does calls this first, so that what it wrote is on the replicas, as with
   * `syncReplicas`, and is not lost to asynchronous replication instead.
   */
  settled(): Promise<void>;
  stop(): Promise<void>;
}

/** Starts a master, two replicas and three sentinels. */
export async function startReplicated(): Promise<Replicated> {
  const root = mkdtempSync(join(tmpdir(), 'latchkey-replicated-'));
  const nodes: Node[] = [];
  const sentinels: Node[] = [];
  const stop = async (): Promise<void> => {
    await Promise.all([...sentinels, ...nodes].map((node) => node.kill()));
    rmSync(root, { recursive: true, force: true });
  };
  const unregister = onProcessExit(() => {
    for (const node of [...sentinels, ...nodes]) {
      if (node.pid !== undefined) {
        try {
          process.kill(node.pid, 'SIGKILL');
        } catch {
          // Gone already.
        }
      }
    }
    rmSync(root, { recursive: true, force: true });
  });
  try {
    for (let i = 0; i < 3; i += 1) {
      const port = await freePort();
      const dir = join(root, `node-${port}`);
      mkdirSync(dir);
      nodes.push(
        new Node(port, dir, (replicaOf) => [
          '--port',
          String(port),
          '--bind',
          LOOPBACK,
          '--save',
          '',
          '--appendonly',
          'no',
          '--dir',
          dir,
          // A replica that must sync in full (after a failover, or restarted empty) starts at
          // once instead of waiting for others to join a diskless transfer; and a replica that
          // fell a few MB behind (the failover tests fill the master's buffers) resyncs in part.
          '--repl-diskless-sync-delay',
          '0',
          '--repl-backlog-size',
          '64mb',
          ...(replicaOf === undefined ? [] : ['--replicaof', LOOPBACK, String(replicaOf)]),
        ]),
      );
    }
    const masterPort = nodes[0]!.port;
    await nodes[0]!.start();
    await Promise.all(nodes.slice(1).map((node) => node.start(masterPort)));
    for (let i = 0; i < 3; i += 1) {
      const port = await freePort();
      const dir = join(root, `sentinel-${port}`);
      mkdirSync(dir);
      const conf = join(dir, 'sentinel.conf');
      writeFileSync(
        conf,
        [
          `port ${port}`,
          `bind ${LOOPBACK}`,
          `dir ${dir}`,
          `sentinel monitor ${MASTER_NAME} ${LOOPBACK} ${masterPort} 2`,
          `sentinel down-after-milliseconds ${MASTER_NAME} ${DOWN_AFTER_MS}`,
          `sentinel failover-timeout ${MASTER_NAME} ${FAILOVER_TIMEOUT_MS}`,
          `sentinel parallel-syncs ${MASTER_NAME} 2`,
          `logfile ${join(dir, 'sentinel.log')}`,
          '',
        ].join('\n'),
      );
      sentinels.push(new Node(port, dir, () => [conf, '--sentinel']));
    }
    await Promise.all(sentinels.map((sentinel) => sentinel.start()));
    await waitForReplicas(masterPort, 2);
  } catch (error) {
    unregister();
    await stop();
    throw error;
  }

  const askSentinels = async (): Promise<number> => {
    const counts = new Map<number, number>();
    await Promise.all(
      sentinels
        .filter((sentinel) => sentinel.running)
        .map(async (sentinel) => {
          const client = createClient({
            socket: { host: LOOPBACK, port: sentinel.port, reconnectStrategy: false },
          });
          client.on('error', () => undefined);
          try {
            await client.connect();
            const reply = await client.sendCommand<string[]>([
              'SENTINEL',
              'get-master-addr-by-name',
              MASTER_NAME,
            ]);
            const port = Number(reply[1]);
            counts.set(port, (counts.get(port) ?? 0) + 1);
          } catch {
            // Not answering: not counted.
          } finally {
            quietly(() => client.destroy());
          }
        }),
    );
    let best = -1;
    let bestCount = 0;
    for (const [port, count] of counts) {
      if (count > bestCount) {
        best = port;
        bestCount = count;
      }
    }
    if (bestCount < 2) throw new Error('the sentinels do not agree on a master');
    return best;
  };

  const byPort = (port: number): Node => {
    const node = nodes.find((candidate) => candidate.port === port);
    if (node === undefined) throw new Error(`no data node on port ${port}`);
    return node;
  };

  const replicated: Replicated = {
    nodes,
    sentinels,
    sentinelRootNodes: sentinels.map((sentinel) => ({ host: LOOPBACK, port: sentinel.port })),
    masterPort: askSentinels,
    master: async () => byPort(await askSentinels()),
    replicas: async () => {
      const master = await askSentinels();
      return nodes.filter((node) => node.port !== master && node.running);
    },
    async failover(options) {
      const from = await askSentinels();
      await byPort(from).kill();
      options?.afterKill?.();
      const deadline = Date.now() + 30_000;
      let to = from;
      for (;;) {
        await delay(100);
        try {
          to = await askSentinels();
          if (to !== from && (await roleOf(to)) === 'master') break;
        } catch {
          // Sentinels mid-election: ask again.
        }
        if (Date.now() > deadline) throw new Error(`no new master within 30 s after killing port ${from}`);
      }
      if (options?.revive !== false) await replicated.revive();
      return { from, to };
    },
    async revive() {
      const master = await askSentinels();
      for (const node of nodes) if (!node.running) await node.start(master);
      // After a failover the sentinels first point the other replica at the new master. They may
      // also elect again meanwhile (a busy machine misses a ping): the master is asked anew on
      // every check, so the wait follows it.
      await waitForReplicas(askSentinels, nodes.length - 1, 60_000);
    },
    async settled() {
      const running = nodes.filter((node) => node.running).length;
      await waitForReplicas(askSentinels, running - 1, 60_000);
    },
    async stop() {
      unregister();
      await stop();
    },
  };
  return replicated;
}

/** `ROLE`'s first field on the node at `port`. */
export async function roleOf(port: number): Promise<string | undefined> {
  const client = createClient({ socket: { host: LOOPBACK, port, reconnectStrategy: false } });
  client.on('error', () => undefined);
  try {
    await client.connect();
    const reply = await client.sendCommand<unknown[]>(['ROLE']);
    return String(reply[0]);
  } catch {
    return undefined;
  } finally {
    quietly(() => client.destroy());
  }
}

/**
 * Waits until the master at `master` reports `count` replicas online and caught up; `master` may be
 * a function that names the current master, asked on every check.
 */
export async function waitForReplicas(
  master: number | (() => Promise<number>),
  count: number,
  timeoutMs = 20_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let online = 0;
  let port = typeof master === 'number' ? master : 0;
  for (;;) {
    try {
      if (typeof master !== 'number') port = await master();
    } catch {
      // Sentinels mid-election: ask again.
    }
    const client = createClient({ socket: { host: LOOPBACK, port, reconnectStrategy: false } });
    client.on('error', () => undefined);
    try {
      await client.connect();
      const info = await client.sendCommand<string>(['INFO', 'replication']);
      online = info.match(/^slave\d+:.*state=online/gm)?.length ?? 0;
      if (online >= count && Number(await client.sendCommand(['WAIT', String(count), '100'])) >= count)
        return;
    } catch {
      // Not answering yet: ask again.
    } finally {
      quietly(() => client.destroy());
    }
    if (Date.now() > deadline)
      throw new Error(`master on port ${port} has ${online} of ${count} replicas online`);
    await delay(100);
  }
}
