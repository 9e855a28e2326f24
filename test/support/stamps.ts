/**
 * Monotonic nanosecond stamps, comparable across the processes of one machine: worker-io's
 * emit() adds one (`t`, decimal) to every message a worker sends.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { WorkerMessage } from './child.js';

export function now(): bigint {
  return process.hrtime.bigint();
}

export function msBetween(from: bigint, to: bigint): number {
  return Number(to - from) / 1e6;
}

/** A message's stamp (`t`, or another field holding one). */
export function stamp(msg: WorkerMessage, field = 't'): bigint {
  const value = msg[field];
  if (typeof value !== 'string') throw new Error(`expected a nanosecond stamp in ${field}`);
  return BigInt(value);
}

/** Matches worker messages of any of the given types. */
export function ofType(...types: string[]): (msg: WorkerMessage) => boolean {
  return (msg) => types.includes(String(msg['type']));
}

/** The longest this process's event loop was held up since {@link watchEventLoopDelay}, so far. */
export interface EventLoopDelayWatch {
  /** In milliseconds, within the sampling resolution (10 ms). */
  maxMs(): number;
  stop(): void;
}

/**
 * Watches how late this process's event loop runs (it is held up by a busy machine's scheduler
 * as much as by its own work): what a test measures before it expects timers to keep time.
 */
export function watchEventLoopDelay(): EventLoopDelayWatch {
  const histogram = monitorEventLoopDelay({ resolution: 10 });
  histogram.enable();
  return {
    maxMs: () => histogram.max / 1e6,
    stop: () => histogram.disable(),
  };
}
