/**
 * Independent Redis masters for the Redlock tests: `count` redis-servers of their own, each on
 * a free loopback port, with the tests' connections to them. Servers a test killed or paused
 * are brought back (restarted empty, or resumed) by `heal()`, so the next test starts whole.
 */
import {
  connectClient,
  connectNodeRedis,
  destroyClient,
  type LockConnection,
  type NodeRedis,
} from './clients.js';
import { startRedis, type RedisInstance } from './redis-server.js';

export interface Masters {
  readonly servers: readonly RedisInstance[];
  /** One new client per master, of the library under test; closed by `closeClients()`. */
  connect(): Promise<LockConnection[]>;
  /** One node-redis connection per master for the tests' own commands (EXISTS, HGETALL...). */
  readonly admin: readonly NodeRedis[];
  /** Closes every client `connect()` made. */
  closeClients(): void;
  /** Resumes paused servers and restarts killed ones (empty), then reconnects the admin clients. */
  heal(): Promise<void>;
  /** Stops every server for good. */
  stop(): Promise<void>;
  /** Records a server as paused or killed, so `heal()` knows what to undo. */
  pause(index: number): Promise<void>;
  resume(index: number): Promise<void>;
  kill(index: number): Promise<void>;
}

export async function startMasters(count: number): Promise<Masters> {
  const servers = await Promise.all(Array.from({ length: count }, () => startRedis()));
  const admin: NodeRedis[] = await Promise.all(
    servers.map((server) => connectNodeRedis({ url: server.url })),
  );
  const clients: LockConnection[] = [];
  const paused = new Set<number>();
  const killed = new Set<number>();
  const at = (index: number): RedisInstance => {
    const server = servers[index];
    if (server === undefined) throw new Error(`no master ${index}`);
    return server;
  };
  const resume = async (index: number): Promise<void> => {
    paused.delete(index);
    await at(index).resume();
  };
  return {
    servers,
    admin,
    async connect() {
      const made = await Promise.all(servers.map((server) => connectClient({ url: server.url })));
      clients.push(...made);
      return made;
    },
    closeClients() {
      for (const client of clients.splice(0)) destroyClient(client);
    },
    async pause(index) {
      paused.add(index);
      await at(index).pause();
    },
    resume,
    async kill(index) {
      killed.add(index);
      await at(index).kill('SIGKILL');
    },
    async heal() {
      for (const index of [...paused]) await resume(index);
      for (const index of [...killed]) {
        killed.delete(index);
        await at(index).restart();
        const old = admin[index];
        if (old !== undefined) destroyClient(old);
        admin[index] = await connectNodeRedis({ url: at(index).url });
      }
      await Promise.all(admin.map((client) => client.sendCommand(['FLUSHALL'])));
    },
    async stop() {
      for (const client of clients.splice(0)) destroyClient(client);
      for (const client of admin) destroyClient(client);
      await Promise.all(servers.map((server) => server.stop()));
    },
  };
}

/** Enter/exit log of critical sections: any overlap is a violation of mutual exclusion. */
export class ExclusionLog {
  #inside = 0;
  overlaps = 0;
  entries = 0;
  enter(): void {
    this.#inside += 1;
    this.entries += 1;
    if (this.#inside > 1) this.overlaps += 1;
  }
  exit(): void {
    this.#inside -= 1;
  }
}
