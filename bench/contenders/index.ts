// The registry of contender adapters, by the key used in results and on the command line.
import { floor2Evalsha } from './floor-2evalsha.js';
import { floorPubsub } from './floor-pubsub.js';
import { floorRlock } from './floor-rlock.js';
import { floorSetnx } from './floor-setnx.js';
import { latchkey } from './latchkey.js';
import { latchkeyGlide, latchkeyIoredis, latchkeyIovalkey } from './latchkey-clients.js';
import {
  latchkeyFair,
  latchkeyFenced,
  latchkeyPermits,
  latchkeyReadWrite,
  latchkeySemaphore,
  latchkeySimple,
} from './latchkey-kinds.js';
import { nodeRedisson } from './node-redisson.js';
import { redisSemaphore } from './redis-semaphore.js';
import { rsMultiSemaphore, rsSemaphore } from './redis-semaphore-kinds.js';
import { redlock } from './redlock.js';
import { sesameRedlock } from './sesame-redlock.js';
import { simpleRedisMutex } from './simple-redis-mutex.js';
import type { Adapter, ContenderName } from './types.js';

export const ADAPTERS: Readonly<Record<ContenderName, Adapter>> = {
  latchkey,
  redlock,
  'sesame-redlock': sesameRedlock,
  'redis-semaphore': redisSemaphore,
  'node-redisson': nodeRedisson,
  'simple-redis-mutex': simpleRedisMutex,
  'floor-setnx': floorSetnx,
  'floor-2evalsha': floor2Evalsha,
  'floor-pubsub': floorPubsub,
  'floor-rlock': floorRlock,
  'latchkey-fenced': latchkeyFenced,
  'latchkey-simple': latchkeySimple,
  'latchkey-fair': latchkeyFair,
  'latchkey-rw': latchkeyReadWrite,
  'latchkey-semaphore': latchkeySemaphore,
  'latchkey-permits': latchkeyPermits,
  'latchkey-ioredis': latchkeyIoredis,
  'latchkey-iovalkey': latchkeyIovalkey,
  'latchkey-glide': latchkeyGlide,
  'rs-semaphore': rsSemaphore,
  'rs-multisemaphore': rsMultiSemaphore,
};
