/**
 * Loopback ports for tests that need an address where nothing listens.
 */
import { createServer } from 'node:net';

/**
 * A loopback port that was free a moment ago and has nothing listening on it: a connection to it
 * is refused, as one to a server that is down.
 */
export function closedPort(): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => {
        if (address !== null && typeof address === 'object') resolve(address.port);
        else reject(new Error('no port'));
      });
    });
  });
}
