import type { Redis } from 'ioredis';

/**
 * Deletes a test's Redis keys (`pattern`, e.g. `test:rl:<run>*`) and disconnects the client, even when the
 * deletion fails: a client left reconnecting to a Redis gone away kept its test file from ever ending.
 */
export async function dropKeysAndDisconnect(redis: Redis, pattern: string): Promise<void> {
  try {
    const keys = await redis.keys(pattern);
    if (keys.length > 0) await redis.del(...keys);
  } finally {
    redis.disconnect();
  }
}
