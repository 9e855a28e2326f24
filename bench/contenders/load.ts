// The adapters for the worker processes, loaded on first use: a worker runs one contender, so it
// imports that contender's library only (workers start faster, and no other library's module
// state sits in its heap).
import type { Adapter, ContenderName } from './types.js';

const LOADERS: Readonly<Record<ContenderName, () => Promise<Adapter>>> = {
  latchkey: async () => (await import('./latchkey.js')).latchkey,
  redlock: async () => (await import('./redlock.js')).redlock,
  'sesame-redlock': async () => (await import('./sesame-redlock.js')).sesameRedlock,
  'redis-semaphore': async () => (await import('./redis-semaphore.js')).redisSemaphore,
  'node-redisson': async () => (await import('./node-redisson.js')).nodeRedisson,
  'simple-redis-mutex': async () => (await import('./simple-redis-mutex.js')).simpleRedisMutex,
  'floor-setnx': async () => (await import('./floor-setnx.js')).floorSetnx,
  'floor-2evalsha': async () => (await import('./floor-2evalsha.js')).floor2Evalsha,
  'floor-pubsub': async () => (await import('./floor-pubsub.js')).floorPubsub,
  'floor-rlock': async () => (await import('./floor-rlock.js')).floorRlock,
  'latchkey-fenced': async () => (await import('./latchkey-kinds.js')).latchkeyFenced,
  'latchkey-simple': async () => (await import('./latchkey-kinds.js')).latchkeySimple,
  'latchkey-fair': async () => (await import('./latchkey-kinds.js')).latchkeyFair,
  'latchkey-rw': async () => (await import('./latchkey-kinds.js')).latchkeyReadWrite,
  'latchkey-semaphore': async () => (await import('./latchkey-kinds.js')).latchkeySemaphore,
  'latchkey-permits': async () => (await import('./latchkey-kinds.js')).latchkeyPermits,
  'latchkey-ioredis': async () => (await import('./latchkey-clients.js')).latchkeyIoredis,
  'latchkey-iovalkey': async () => (await import('./latchkey-clients.js')).latchkeyIovalkey,
  'latchkey-glide': async () => (await import('./latchkey-clients.js')).latchkeyGlide,
  'rs-semaphore': async () => (await import('./redis-semaphore-kinds.js')).rsSemaphore,
  'rs-multisemaphore': async () => (await import('./redis-semaphore-kinds.js')).rsMultiSemaphore,
};

/** The adapter of `contender`, its module imported the first time it is asked for. */
export function loadAdapter(contender: ContenderName): Promise<Adapter> {
  return LOADERS[contender]();
}
