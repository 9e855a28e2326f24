/**
 * Counting the commands one connection sends while an action runs, for "exactly N round
 * trips" and "nothing was sent" assertions.
 */
import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import { commandsFrom, type CommandMonitor } from './monitor.js';

export interface WatchedConnection {
  /** The connection whose commands are counted; it also sends the markers. */
  readonly redis: { sendCommand(args: string[]): Promise<unknown> };
  /** Its address as MONITOR prints it (clientAddr()). */
  readonly addr: string;
  /** A monitor started before the action. */
  readonly monitor: CommandMonitor;
}

/**
 * The commands `watched.redis`'s connection sent while `action` ran (scripts' own calls are
 * not the connection's). ECHO markers on the same connection bracket the count: one
 * connection's commands reach MONITOR in order, so once the closing marker is seen every
 * command before it has been too.
 */
export async function commandsDuring(
  watched: WatchedConnection,
  action: () => Promise<void>,
): Promise<string[][]> {
  const { redis, addr, monitor } = watched;
  const marker = randomBytes(6).toString('hex');
  const isMarker = (command: string[], edge: string): boolean =>
    command[0]?.toUpperCase() === 'ECHO' && command[1] === `${marker}:${edge}`;
  await redis.sendCommand(['ECHO', `${marker}:start`]);
  await action();
  await redis.sendCommand(['ECHO', `${marker}:end`]);
  const mine = (): string[][] => commandsFrom(monitor.lines, { excludeLua: true, clientAddr: addr });
  await monitor.waitFor(() => mine().some((command) => isMarker(command, 'end')));
  const all = mine();
  const start = all.findIndex((command) => isMarker(command, 'start'));
  const end = all.findIndex((command) => isMarker(command, 'end'));
  expect(start).toBeGreaterThanOrEqual(0);
  return all.slice(start + 1, end);
}
