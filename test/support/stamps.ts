/**
 * Monotonic nanosecond stamps, comparable across the processes of one machine: worker-io's
 * emit() adds one (`t`, decimal) to every message a worker sends.
 */
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
