/**
 * What a Redis Cluster needs from the scripts and the adapter, without a server: every script
 * that publishes has a sharded twin that publishes nothing with PUBLISH, and commands are routed
 * by the right key.
 */
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { firstKeyOf } from '../../src/redis/cluster-routing.js';
import { luaScripts } from '../../src/scripts/generated.js';
import type { LuaScript } from '../../src/scripts/script.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const { shardedTwin } = (await import(join(root, 'scripts', 'build-lua.mjs'))) as {
  shardedTwin: (source: string) => { sha1: string; source: string } | undefined;
};

const PUBLISH = /redis\.p?call\('publish'/;

describe('sharded twins of the scripts', () => {
  const scripts: readonly LuaScript[] = Object.values(luaScripts);

  it('exist exactly for the scripts that publish, with PUBLISH made SPUBLISH, PUBSUB NUMSUB made PUBSUB SHARDNUMSUB and nothing else changed', () => {
    expect(scripts.filter((script) => script.sharded !== undefined).length).toBeGreaterThan(20);
    for (const script of scripts) {
      const twin = script.sharded;
      expect({ name: script.name, twin: twin !== undefined }).toEqual({
        name: script.name,
        twin: PUBLISH.test(script.source),
      });
      if (twin === undefined) continue;
      expect(twin.source).not.toMatch(PUBLISH);
      expect(twin.source).not.toContain("'numsub'");
      expect(twin.source.replaceAll("'spublish'", "'publish'").replaceAll("'shardnumsub'", "'numsub'")).toBe(
        script.source,
      );
      expect(twin.sha1).toBe(createHash('sha1').update(twin.source).digest('hex'));
    }
  });

  it('turns call and pcall alike', () => {
    const twin = shardedTwin("redis.call('publish', a, '0')\nlocal n = redis.pcall('publish', b, '1')\n");
    expect(twin?.source).toBe("redis.call('spublish', a, '0')\nlocal n = redis.pcall('spublish', b, '1')\n");
    expect(shardedTwin("return redis.call('get', KEYS[1])")).toBeUndefined();
  });

  it('makes the hand-over count the sharded listeners of a grant channel', () => {
    const twin = shardedTwin(
      "if redis.call('pubsub', 'numsub', c)[2] > 0 then redis.pcall('publish', c, m) end",
    );
    expect(twin?.source).toBe(
      "if redis.call('pubsub', 'shardnumsub', c)[2] > 0 then redis.pcall('spublish', c, m) end",
    );
    expect(luaScripts['lock/release'].sharded?.source).toContain(
      "redis.pcall('pubsub', 'shardnumsub', grantChannel)",
    );
  });
});

describe('routing on a cluster', () => {
  it.each([
    [['EVALSHA', 'abc', '2', 'lock', 'queue', 'arg'], 'lock'],
    [['EVAL', 'return 1', '1', '{t}:x'], '{t}:x'],
    [['EVALSHA', 'abc', '0', 'arg'], undefined],
    [['HGET', 'lock', 'field'], 'lock'],
    [['PTTL', 'lock'], 'lock'],
    [['INFO', 'server'], undefined],
    [['CLUSTER', 'SLOTS'], undefined],
  ])('%j goes by %j', (args, key) => {
    expect(firstKeyOf(args)).toBe(key);
  });
});
