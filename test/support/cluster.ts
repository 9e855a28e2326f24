/**
 * A real local Redis Cluster for tests: 3 masters and 3 replicas, `redis-server` processes on
 * free loopback ports (each port and its cluster bus port, port + 10000), joined with
 * `redis-cli --cluster create ... --cluster-replicas 1`. Started once per test file; `stop()`
 * kills every node and removes its files (also when the test process dies).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient, createCluster } from 'redis';
import { onProcessExit } from './cleanup.js';

const HOST = '127.0.0.1';
const READY_TIMEOUT_MS = 30_000;

export interface ClusterNode {
  readonly port: number;
  readonly url: string;
  /** Whether the process runs (false after `kill`). */
  readonly alive: boolean;
  /** SIGKILL, and waits until the process is gone. */
  kill(): Promise<void>;
  /** Starts the node again on its port with its config (it rejoins the cluster). */
  restart(): Promise<void>;
}

export interface LocalCluster {
  readonly nodes: readonly ClusterNode[];
  /** `redis://127.0.0.1:<port>` of every node, for `createCluster({ rootNodes })`. */
  readonly rootNodes: ReadonlyArray<{ url: string }>;
  /** One command on one node, on a short-lived connection of its own. */
  command(port: number, args: string[]): Promise<unknown>;
  /** The port of the master that serves `slot` now. */
  masterOf(slot: number): Promise<number>;
  /** The ports of the masters, and of the replicas, as the cluster sees them now. */
  roles(): Promise<{ masters: number[]; replicas: number[] }>;
  /** Waits until every live node says `cluster_state:ok` and agrees on the masters. */
  waitHealthy(timeoutMs?: number): Promise<void>;
  /** Kills every node and removes the files. Safe to call twice. */
  stop(): Promise<void>;
}

/** A node's port, or its bus port, was taken by another process between the check and the bind. */
class PortTakenError extends Error {}

/** How many times a cluster is started on fresh ports when another process took one first. */
const PORT_ATTEMPTS = 5;

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, HOST, () => server.close(() => resolve(true)));
  });
}

/** Six ports whose bus ports (port + 10000) are free too. */
async function freePorts(count: number): Promise<number[]> {
  const ports: number[] = [];
  for (let attempt = 0; ports.length < count && attempt < 500; attempt += 1) {
    const port = 20_000 + Math.floor(Math.random() * 25_000);
    if (ports.includes(port) || ports.includes(port + 10_000) || ports.includes(port - 10_000)) continue;
    if ((await portFree(port)) && (await portFree(port + 10_000))) ports.push(port);
  }
  if (ports.length < count) throw new Error('no free loopback ports for a cluster');
  return ports;
}

async function commandOn(port: number, args: string[]): Promise<unknown> {
  const client = createClient({
    socket: { host: HOST, port, reconnectStrategy: false, connectTimeout: 2_000 },
  });
  client.on('error', () => {});
  await client.connect();
  try {
    return await client.sendCommand(args);
  } finally {
    client.destroy();
  }
}

class Node implements ClusterNode {
  readonly port: number;
  readonly url: string;
  readonly #dir: string;
  #process: ChildProcess | undefined;
  /** The end of what the running process printed: the reason, when it exits at start. */
  #output = '';

  constructor(port: number, dir: string) {
    this.port = port;
    this.url = `redis://${HOST}:${port}`;
    this.#dir = dir;
  }

  get alive(): boolean {
    return (
      this.#process !== undefined && this.#process.exitCode === null && this.#process.signalCode === null
    );
  }

  get pid(): number | undefined {
    return this.#process?.pid;
  }

  async start(): Promise<void> {
    const child = spawn(
      'redis-server',
      [
        '--port',
        String(this.port),
        '--bind',
        HOST,
        '--dir',
        this.#dir,
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        'nodes.conf',
        '--cluster-node-timeout',
        '1000',
        '--cluster-replica-validity-factor',
        '0',
        '--save',
        '',
        '--appendonly',
        'no',
        '--enable-debug-command',
        'yes',
        '--loglevel',
        'warning',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    child.unref();
    this.#process = child;
    this.#output = '';
    for (const stream of [child.stdout, child.stderr]) {
      stream.setEncoding('utf8').on('data', (chunk: string) => {
        this.#output = (this.#output + chunk).slice(-4_000);
      });
      (stream as unknown as { unref?: () => void }).unref?.();
    }
    const until = performance.now() + READY_TIMEOUT_MS;
    for (;;) {
      try {
        if ((await commandOn(this.port, ['PING'])) === 'PONG') return;
      } catch {
        // Not listening yet.
      }
      if (!this.alive) {
        // 'exit' can overtake the last output, which holds the reason.
        await delay(50);
        const reason = `redis-server on port ${this.port} exited at start. Output:\n${this.#output}`;
        throw /address already in use/i.test(this.#output) ? new PortTakenError(reason) : new Error(reason);
      }
      if (performance.now() > until) throw new Error(`redis-server on port ${this.port} did not start`);
      await delay(50);
    }
  }

  async kill(): Promise<void> {
    const child = this.#process;
    if (child === undefined || !this.alive) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    await exited;
  }

  restart(): Promise<void> {
    return this.start();
  }

  killNow(): void {
    if (this.alive) this.#process?.kill('SIGKILL');
  }
}

/**
 * Starts a cluster of 3 masters and 3 replicas and waits until it is healthy. The ports are
 * checked free before the nodes bind them, so another process can take one in between: the
 * cluster then starts again on other ports.
 */
export async function startCluster(): Promise<LocalCluster> {
  if (spawnSync('redis-server', ['--version']).status !== 0) throw new Error('redis-server is not on PATH');
  let lastError: unknown;
  for (let attempt = 0; attempt < PORT_ATTEMPTS; attempt += 1) {
    try {
      return await startClusterOnce();
    } catch (error) {
      if (!(error instanceof PortTakenError)) throw error;
      lastError = error;
    }
  }
  throw new Error(`no cluster could bind its ports in ${PORT_ATTEMPTS} attempts`, { cause: lastError });
}

async function startClusterOnce(): Promise<LocalCluster> {
  const root = mkdtempSync(join(tmpdir(), 'latchkey-cluster-'));
  const ports = await freePorts(6);
  const nodes = ports.map((port) => {
    const dir = join(root, String(port));
    spawnSync('mkdir', ['-p', dir]);
    return new Node(port, dir);
  });
  let stopped = false;
  const removeExitHook = onProcessExit(() => {
    for (const node of nodes) node.killNow();
    rmSync(root, { recursive: true, force: true });
  });
  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    await Promise.all(nodes.map((node) => node.kill()));
    rmSync(root, { recursive: true, force: true });
    removeExitHook();
  };
  const cluster: LocalCluster = {
    nodes,
    rootNodes: nodes.map((node) => ({ url: node.url })),
    command: commandOn,
    async masterOf(slot) {
      for (const node of nodes) {
        if (!node.alive) continue;
        try {
          const slots = (await commandOn(node.port, ['CLUSTER', 'SLOTS'])) as Array<
            [number, number, [string, number]]
          >;
          for (const [from, to, master] of slots) {
            if (slot >= from && slot <= to) return Number(master[1]);
          }
        } catch {
          // Ask another node.
        }
      }
      throw new Error(`no node knows who serves slot ${slot}`);
    },
    async roles() {
      const masters: number[] = [];
      const replicas: number[] = [];
      for (const node of nodes) {
        if (!node.alive) continue;
        const role = (await commandOn(node.port, ['ROLE'])) as [string];
        (role[0] === 'master' ? masters : replicas).push(node.port);
      }
      return { masters, replicas };
    },
    async waitHealthy(timeoutMs = READY_TIMEOUT_MS) {
      const until = performance.now() + timeoutMs;
      for (;;) {
        let ok = true;
        for (const node of nodes) {
          if (!node.alive) continue;
          try {
            const info = String(await commandOn(node.port, ['CLUSTER', 'INFO']));
            if (!info.includes('cluster_state:ok')) ok = false;
          } catch {
            ok = false;
          }
        }
        if (ok) {
          // Every live node sees the same set of masters serving all 16384 slots.
          const views = await Promise.all(
            nodes
              .filter((node) => node.alive)
              .map(async (node) =>
                (
                  (await commandOn(node.port, ['CLUSTER', 'SLOTS'])) as Array<
                    [number, number, [string, number]]
                  >
                )
                  .map(([from, to, master]) => `${from}-${to}@${master[1]}`)
                  .sort()
                  .join(','),
              ),
          );
          if (views.every((view) => view === views[0])) return;
        }
        if (performance.now() > until) throw new Error('the cluster did not become healthy in time');
        await delay(100);
      }
    },
    stop,
  };
  try {
    await Promise.all(nodes.map((node) => node.start()));
    const created = spawnSync(
      'redis-cli',
      [
        '--cluster',
        'create',
        ...ports.map((port) => `${HOST}:${port}`),
        '--cluster-replicas',
        '1',
        '--cluster-yes',
      ],
      { encoding: 'utf8', timeout: READY_TIMEOUT_MS },
    );
    if (created.status !== 0)
      throw new Error(`redis-cli --cluster create failed: ${created.stdout}${created.stderr}`);
    await cluster.waitHealthy();
    // Replicas have synced: a failover finds one ready.
    await waitReplicasSynced(cluster);
  } catch (error) {
    await stop();
    throw error;
  }
  return cluster;
}

async function waitReplicasSynced(cluster: LocalCluster): Promise<void> {
  const until = performance.now() + READY_TIMEOUT_MS;
  for (;;) {
    const { replicas } = await cluster.roles();
    const states = await Promise.all(
      replicas.map(async (port) => String(await cluster.command(port, ['INFO', 'replication']))),
    );
    if (replicas.length === 3 && states.every((info) => info.includes('master_link_status:up'))) return;
    if (performance.now() > until) throw new Error('the replicas did not sync in time');
    await delay(100);
  }
}

/** The node-redis cluster client `createCluster()` gives. */
export type ClusterClient = ReturnType<typeof createCluster>;

/** A connected node-redis cluster client on `cluster`; its 'error' events are ignored. */
export async function connectCluster(cluster: LocalCluster): Promise<ClusterClient> {
  const client = createCluster({
    rootNodes: [...cluster.rootNodes],
    defaults: { socket: { connectTimeout: 2_000 } },
  });
  client.on('error', () => {});
  await client.connect();
  return client;
}
