/**
 * One Lua script embedded at build time from `lua-scripts/`.
 * @internal
 */
export interface LuaScript {
  /** Path below `lua-scripts/` without `.lua`, e.g. `lock/acquire`. */
  readonly name: string;
  /** Number of KEYS the script takes; `null` when it takes any number. */
  readonly numberOfKeys: number | null;
  readonly sha1: string;
  readonly source: string;
  /**
   * The same script publishing with SPUBLISH instead of PUBLISH, for sharded pub/sub on a Redis
   * Cluster; absent when the script publishes nothing.
   */
  readonly sharded?: { readonly sha1: string; readonly source: string };
}
