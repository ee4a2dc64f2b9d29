import { createHash } from 'node:crypto';
import { Redis, type RedisOptions } from 'ioredis';
import type { Clock } from '../../lib/clock.ts';
import {
  rateLimitState,
  resolvePolicy,
  ACCEPTED,
  type RateLimitDecision,
  type RateLimitPolicy,
  type RateLimitState,
  type RateLimitStore,
} from './rate-limiter.ts';

/*
 * Per IP two keys:
 *   <prefix>{<ip>}:log    list of the IP's last `limit` accept times (epoch ms), newest first
 *   <prefix>{<ip>}:block  epoch ms at which the IP's block ends
 * The list is the Redis twin of the memory store's ring: at most `limit` integers (~20 KB at
 * 2,000 in a listpack), and it expires `window` ms after the IP's last accept.
 *
 * DESIGN §5: "now" is Redis's own TIME, so instances with skewed clocks agree. ARGV[4] may carry an
 * explicit now: TEST ONLY (see `testClock`), production always sends '' and Redis TIME is used.
 * Scripts that call TIME and then write are fine since Redis 5 (effects replication; the only mode
 * in Redis 7).
 */
const NOW_LUA = `
local now = tonumber(ARGV[4])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end`;

/**
 * Decides a batch of requests, in order, atomically: KEYS are (log, block) pairs, one pair per request
 * (an IP may appear more than once). → flat {allowed 0|1, retry_after_ms, block_started 0|1} per request.
 */
const HIT_LUA = `
local limit, window, block = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
${NOW_LUA}
local function decide(log, blk)
  local blocked_until = tonumber(redis.call('GET', blk))
  if blocked_until then
    -- wire-contract §2.3: refused during the block and not counted
    if now < blocked_until then return 0, blocked_until - now, 0 end
    -- block over: the IP starts afresh
    redis.call('DEL', log, blk)
  end
  local n = redis.call('LLEN', log)
  if n >= limit then
    if n > limit then redis.call('LTRIM', log, 0, limit - 1) end
    -- the limit-th newest accept is still inside the window: this request would be one too many
    local oldest = tonumber(redis.call('LINDEX', log, -1))
    if now - oldest < window then
      -- the log is kept (the operator view shows the count) and cleared when the block ends; the
      -- block key outlives the block by a window so that the clearing above sees it
      redis.call('SET', blk, string.format('%d', now + block), 'PX', block + window)
      return 0, block, 1
    end
  end
  redis.call('LPUSH', log, string.format('%d', now))
  if n >= limit then redis.call('LTRIM', log, 0, limit - 1) end
  redis.call('PEXPIRE', log, window)
  return 1, 0, 0
end
local out = {}
for i = 1, #KEYS, 2 do
  local allowed, retry_after, started = decide(KEYS[i], KEYS[i + 1])
  out[#out + 1] = allowed
  out[#out + 1] = retry_after
  out[#out + 1] = started
end
return out
`;

/** → {count in window, blocked_until or -1, now}. */
const INSPECT_LUA = `
local limit, window = tonumber(ARGV[1]), tonumber(ARGV[2])
${NOW_LUA}
local blocked_until = tonumber(redis.call('GET', KEYS[2]))
if blocked_until and now >= blocked_until then return {0, -1, now} end
local count = 0
for _, t in ipairs(redis.call('LRANGE', KEYS[1], 0, limit - 1)) do
  if now - tonumber(t) < window then count = count + 1 end
end
return {count, blocked_until or -1, now}
`;

class LuaScript {
  private readonly sha: string;
  constructor(private readonly source: string) {
    this.sha = createHash('sha1').update(source).digest('hex');
  }
  /** EVALSHA, and EVAL once when the server does not have the script cached yet (NOSCRIPT). */
  run(client: Redis, numKeys: number, keysAndArgs: string[]): Promise<number[]> {
    return (client.evalsha(this.sha, numKeys, ...keysAndArgs) as Promise<number[]>).catch((err: unknown) => {
      if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
      return client.eval(this.source, numKeys, ...keysAndArgs) as Promise<number[]>;
    });
  }
}

function toDecision(flat: number[], at: number): RateLimitDecision {
  if (flat[at] === 1) return ACCEPTED;
  return { allowed: false, retryAfterMs: flat[at + 1]!, blockStarted: flat[at + 2] === 1 };
}

/** Requests decided by one script call at most; bounds how long one call holds Redis (~1 ms). */
const MAX_BATCH = 256;

interface PendingHit {
  ip: string;
  resolve: (decision: RateLimitDecision) => void;
  reject: (err: unknown) => void;
}

const hitScript = new LuaScript(HIT_LUA);
const inspectScript = new LuaScript(INSPECT_LUA);

/**
 * ioredis options for the limiter's connection. Commands must fail fast when Redis is away (so the
 * service falls back to memory instead of holding requests in ioredis' offline queue), and a hung
 * Redis must not hold a request longer than `commandTimeout` (then the request is decided from memory).
 * The timeout is generous because it also fires when this process stalls (GC, CPU starvation) with
 * the answer already waiting: each such timeout is a request decided from memory, not from Redis.
 * ioredis keeps reconnecting.
 */
export function rateLimitRedisOptions(overrides: RedisOptions = {}): RedisOptions {
  return {
    // Requests arriving in the same tick share one write to Redis: fewer syscalls on both sides.
    enableAutoPipelining: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: 1000,
    connectTimeout: 2000,
    lazyConnect: true,
    retryStrategy: (attempt) => Math.min(attempt * 100, 2000),
    ...overrides,
  };
}

export interface RedisRateLimitStoreOptions {
  client: Redis;
  policy?: Partial<RateLimitPolicy>;
  /** Namespace of every key and of the unblock channel. Default `svc:rl:`. */
  keyPrefix?: string;
  /**
   * TEST ONLY. When set, the scripts use this clock's time instead of Redis TIME, so tests can move
   * time without waiting. Production leaves it unset: instances must share Redis's clock.
   */
  testClock?: Clock;
}

/** Shared store: one atomic Lua script per request on Redis's clock; the limit holds across instances. */
export class RedisRateLimitStore implements RateLimitStore {
  readonly policy: RateLimitPolicy;
  readonly client: Redis;
  readonly keyPrefix: string;
  private readonly testClock: Clock | undefined;
  private readonly policyArgs: [string, string, string];
  private pending: PendingHit[] = [];

  constructor(options: RedisRateLimitStoreOptions) {
    this.policy = resolvePolicy(options.policy);
    this.client = options.client;
    this.keyPrefix = options.keyPrefix ?? 'svc:rl:';
    this.testClock = options.testClock;
    this.policyArgs = [String(this.policy.limit), String(this.policy.windowMs), String(this.policy.blockMs)];
  }

  /** Whether the connection is up; while it is not, commands fail at once. */
  get ready(): boolean {
    return this.client.status === 'ready';
  }

  get unblockChannel(): string {
    return `${this.keyPrefix}unblock`;
  }

  /**
   * Decides one request. Requests that arrive in the same turn of the event loop are decided by one
   * script call, in arrival order (at most one round trip per request, fewer under load: ioredis'
   * per-command cost, not Redis, is what a busy instance pays).
   */
  hit(ip: string): Promise<RateLimitDecision> {
    return new Promise((resolve, reject) => {
      if (this.pending.push({ ip, resolve, reject }) === 1) setImmediate(this.flush);
    });
  }

  private readonly flush = (): void => {
    const pending = this.pending;
    this.pending = [];
    for (let from = 0; from < pending.length; from += MAX_BATCH) {
      const batch = pending.slice(from, from + MAX_BATCH);
      const keysAndArgs: string[] = [];
      for (const { ip } of batch) keysAndArgs.push(...this.keys(ip));
      keysAndArgs.push(...this.policyArgs, this.testClock ? String(this.testClock.now()) : '');
      hitScript.run(this.client, batch.length * 2, keysAndArgs).then(
        (flat) => batch.forEach((hit, i) => hit.resolve(toDecision(flat, i * 3))),
        (err: unknown) => batch.forEach((hit) => hit.reject(err)),
      );
    }
  };

  async inspect(ip: string): Promise<RateLimitState> {
    const [count, blockedUntil, now] = await inspectScript.run(this.client, 2, [
      ...this.keys(ip),
      ...this.policyArgs,
      this.testClock ? String(this.testClock.now()) : '',
    ]);
    return rateLimitState(ip, this.policy, count!, blockedUntil === -1 ? null : blockedUntil!, now!);
  }

  /** Clears the IP's log and block, and tells every instance to drop its cached block. */
  async unblock(ip: string): Promise<void> {
    const results = await this.client
      .multi()
      .del(...this.keys(ip))
      .publish(this.unblockChannel, ip)
      .exec();
    const failed = results?.find(([err]) => err !== null);
    if (failed) throw failed[0];
  }

  /**
   * Calls `onUnblock(ip)` whenever any instance lifts a block, so this instance drops its cached
   * "blocked until". Uses a second connection (subscriber mode) that queues the subscription until
   * Redis is reachable and resubscribes after reconnects. `subscribed` settles once it is active.
   */
  subscribeUnblocks(onUnblock: (ip: string) => void): { subscribed: Promise<void>; close: () => void } {
    const subscriber = this.client.duplicate({ enableOfflineQueue: true, lazyConnect: false });
    subscriber.on('error', () => {}); // the service reports Redis trouble through the main connection
    subscriber.on('message', (channel: string, ip: string) => {
      if (channel === this.unblockChannel) onUnblock(ip);
    });
    const subscribed = subscriber.subscribe(this.unblockChannel).then(
      () => undefined,
      () => undefined, // only fails when closed before Redis was reachable
    );
    return { subscribed, close: () => subscriber.disconnect() };
  }

  private keys(ip: string): [string, string] {
    const base = `${this.keyPrefix}{${ip}}`;
    return [`${base}:log`, `${base}:block`];
  }
}
