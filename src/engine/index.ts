// The engine's only door: src/primitives/, src/redlock/ and the top of the library import the
// engine from here and from no other file in src/engine/ (the `engine-one-door` layering rule),
// so the engine's rooms can move without touching the kinds.
export { ABORT_CLEANUP_GRACE_MS } from './acquire/acquire.js';
export type { Synced } from './calls.js';
export type { Condition, ConditionTry } from './condition.js';
export type { ConditionCall } from './condition-telemetry.js';
export { Engine } from './engine.js';
export { Events } from './events.js';
export { CONTEXT_OWNERS, handleParts, LockHandle } from './handle.js';
export type { HandleParts } from './handle.js';
export { hashHoldCount } from './hold-count.js';
export { Hold, lostRelease, verifiedOnRead } from './holds/hold.js';
export { Lease, plainLease } from './lease.js';
export type { LeaseHost, LeaseJSON } from './lease.js';
export { countedRelease, renewedFlags, REPLY, sharedAcquireReply, yesOrNo } from './replies.js';
export { ScriptCall } from './script-call.js';
export type { ReplyReader } from './script-call.js';
export { unwatchAbort, watchAbort, within } from './timing.js';
export type { AbortWatcher } from './timing.js';
export type { AcquireOutcome, AcquireRequest, HeldLock, Protocol, ReleaseOutcome, Target } from './types.js';
export { checkAcquireOptions, checkCallback, withLease } from './with-lock.js';
export type { CheckedAcquire, HeldLease } from './with-lock.js';
export { Writes } from './writes.js';
export type { Done, RecordedCall, Written } from './writes.js';
export type { WakePolicy } from './wait/waiter.js';
export type { EngineSettings } from './wiring.js';
