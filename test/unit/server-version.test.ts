import { describe, expect, it } from 'vitest';
import { isAtLeast, MIN_REDIS_VERSION, redisVersionOf } from '../../src/redis/server-version.js';

describe('the minimum Redis server version', () => {
  it('is 6.0.6, the first with LPOS', () => {
    expect(MIN_REDIS_VERSION).toBe('6.0.6');
  });

  it.each([
    ['6.0.6', true],
    ['6.0.7', true],
    ['6.0.10', true],
    ['6.1.0', true],
    ['6.2', true],
    ['7.0.15', true],
    ['7.2.4', true],
    ['10.0.0', true],
    ['255.255.255', true],
    ['6.0.5', false],
    ['6.0.0', false],
    ['6', false],
    ['5.0.14', false],
    ['4.0.9', false],
    ['2.8.24', false],
  ])('%s is recent enough: %s', (version, recent) => {
    expect(isAtLeast(version, MIN_REDIS_VERSION)).toBe(recent);
  });

  it('compares numbers, not text', () => {
    expect(isAtLeast('6.0.10', '6.0.9')).toBe(true);
    expect(isAtLeast('6.0.9', '6.0.10')).toBe(false);
    expect(isAtLeast('10.0.0', '9.9.9')).toBe(true);
  });
});

describe('the version in an INFO server reply', () => {
  const info = (version: string): string =>
    `# Server\r\nredis_version:${version}\r\nredis_git_sha1:00000000\r\nredis_mode:standalone\r\n`;

  it('is read from the redis_version line', () => {
    expect(redisVersionOf(info('7.0.15'))).toBe('7.0.15');
    expect(redisVersionOf(info('6.0.5'))).toBe('6.0.5');
    expect(redisVersionOf('# Server\nredis_version:6.2.14\nvalkey_version:8.0.1\n')).toBe('6.2.14');
  });

  it('is undefined when the reply has none', () => {
    expect(redisVersionOf('# Server\r\nredis_mode:standalone\r\n')).toBeUndefined();
    expect(redisVersionOf('redis_version:\r\n')).toBeUndefined();
    expect(redisVersionOf('')).toBeUndefined();
    expect(redisVersionOf(null)).toBeUndefined();
    expect(redisVersionOf(['redis_version:7.0.0'])).toBeUndefined();
  });
});
