import { createHash } from 'node:crypto';
import { Redis, type RedisOptions } from 'ioredis';
import type { Clock } from '../../lib/clock.ts';
import {
  rateLimitState,
  refused,
  resolvePolicy,
  ACCEPTED,
  type RateLimitDecision,
  type RateLimitPolicy,
  type RateLimitState,
  type RateLimitStore,
} from './rate-limiter.ts';

/*
 * Per IP two keys:
 *   <prefix>{<ip>}:log    the IP's accept times (epoch ms), newest first; at most `limit` entries
 *   <prefix>{<ip>}:block  epoch ms at which the IP's block ends
 * The list is the Redis twin of the memory store's ring (~20 KB at 2,000 in a listpack); it expires
 * `window` ms after the IP's last accept, or with the block key once a block starts.
 *
 * The scripts build the key names from the IP themselves, so a request costs one short argument
 * and Redis no KEYS table. Undeclared keys are fine on a standalone or replicated Redis, which the
 * batched script needs anyway (one call touches the keys of many IPs, in many cluster slots):
 * Redis Cluster is not supported.
 *
 * DESIGN §5: "now" is Redis's own TIME, so instances with skewed clocks agree. ARGV[5] may carry an
 * explicit now: TEST ONLY (see `testClock`), production always sends '' and Redis TIME is used.
 * Expiry times are always on Redis TIME.
 * Scripts that call TIME and then write are fine since Redis 5 (effects replication; the only mode
 * in Redis 7).
 */
const ARGS_LUA = `
local prefix, limit, window, block = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local t = redis.call('TIME')
-- Redis's clock: keys expire on it, and requests are decided on it unless a test sends its own now
local clock = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now = tonumber(ARGV[5]) or clock`;

/**
 * Decides a batch of requests, in order, atomically. ARGV: prefix, limit, window, block, now, deadline, then
 * the IP of each request (an IP may appear more than once). → Redis's clock, then one integer per request:
 * 0 accepted; > 0 refused during a block, ms left; < 0 refused and the block it starts lasts -n ms.
 *
 * deadline ('' for none): the Redis time after which the sender no longer waits for the answer. A batch run
 * later (the call was written to the socket of a Redis that then hung, or of a network that stalled, and
 * the instance decided its requests from memory when the command timed out) writes nothing and answers
 * Redis's clock alone: run as sent, its requests were counted twice, stamped with the time Redis woke up,
 * and blocked IPs that had never gone over the limit (review).
 *
 * The common case costs two calls: LPUSH (which also tells the log's length) and PEXPIREAT. The block
 * key and the window are looked at only when the log then holds more than `limit` entries, which is
 * always so for a blocked IP: a block starts with `limit` accepts in the log, refusals leave the log
 * as it was, and the log lives as long as the block key, which outlasts the block. Entries that have
 * left the window are dropped lazily, when the log is over the limit: O(log limit) calls then, for
 * at least as many cheap requests afterwards as entries dropped.
 */
const HIT_LUA = `${ARGS_LUA}
local call = redis.call
-- Formatted once per batch: a number passed to redis.call is formatted again on every call. Absolute
-- expiry times (PEXPIREAT, PXAT): a relative one is rewritten to absolute by Redis on every call.
local stamp = string.format('%d', now)
local accept_expires_at = string.format('%d', clock + window)

-- Drops the entries older than floor (a tail, as the log is newest first; index 0 is this request's
-- and is never older) with O(log n) LINDEX; returns the log's length afterwards.
local function drop_older(log, n, floor)
  local lo, hi = 1, n
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if tonumber(call('LINDEX', log, mid)) < floor then hi = mid else lo = mid + 1 end
  end
  if lo < n then call('LTRIM', log, 0, lo - 1) end
  return lo
end

-- This request's accept is already at the head of the log, which now holds n > limit entries.
local function over_limit(log, blk, n)
  local blocked_until = tonumber(call('GET', blk))
  if blocked_until then
    -- wire-contract §2.3: refused during the block and not counted
    if now < blocked_until then
      call('LPOP', log)
      return blocked_until - now
    end
    -- block over: the IP starts afresh, its accepts from before the block no longer count
    call('DEL', blk)
    n = drop_older(log, n, blocked_until)
    if n <= limit then
      call('PEXPIREAT', log, accept_expires_at)
      return 0
    end
  end
  -- the limit-th accept before this request is still inside the window: this one is one too many
  if now - tonumber(call('LINDEX', log, limit)) < window then
    call('LPOP', log)
    if n > limit + 1 then call('LTRIM', log, 0, limit - 1) end
    -- the log (shown to the operator) stays through the block and expires with the block key, which
    -- outlasts the block: no log from before a block is ever there without its block key
    local block_expires_at = string.format('%d', clock + block + window)
    call('PEXPIREAT', log, block_expires_at)
    call('SET', blk, string.format('%d', now + block), 'PXAT', block_expires_at)
    return -block
  end
  -- accepted: at least that limit-th accept has left the window; drop every entry that has
  drop_older(log, n, now - window + 1)
  call('PEXPIREAT', log, accept_expires_at)
  return 0
end

local out = {clock}
local deadline = tonumber(ARGV[6])
if deadline and clock > deadline then return out end
for i = 7, #ARGV do
  local log = prefix .. '{' .. ARGV[i] .. '}:log'
  local n = call('LPUSH', log, stamp)
  if n > limit then
    out[i - 5] = over_limit(log, prefix .. '{' .. ARGV[i] .. '}:block', n)
  else
    call('PEXPIREAT', log, accept_expires_at)
    out[i - 5] = 0
  end
end
return out
`;

/** ARGV as for HIT_LUA with one IP. → {count in window, blocked_until or -1, now}. */
const INSPECT_LUA = `${ARGS_LUA}
local key = prefix .. '{' .. ARGV[6] .. '}:'
local blocked_until = tonumber(redis.call('GET', key .. 'block'))
-- counted: accepts less than a window old ...
local floor = now - window + 1
if blocked_until and now >= blocked_until then
  -- ... and, once a block is over, made after it (the next request clears older ones)
  floor = math.max(floor, blocked_until)
  blocked_until = nil
end
local count = 0
for _, t in ipairs(redis.call('LRANGE', key .. 'log', 0, limit - 1)) do
  if tonumber(t) >= floor then count = count + 1 end
end
return {count, blocked_until or -1, now}
`;

/**
 * A script run by its digest, as ioredis's `defineCommand` runs one. Ours rather than that: `defineCommand` adds a
 * method to the client it is given, and the store is handed its caller's client (tests share one across stores);
 * these dozen lines keep the scripts the store's own.
 */
class LuaScript {
  private readonly sha: string;
  constructor(private readonly source: string) {
    this.sha = createHash('sha1').update(source).digest('hex');
  }
  /** EVALSHA with no KEYS, and EVAL once when the server does not have the script cached yet (NOSCRIPT). */
  run(client: Redis, args: string[]): Promise<number[]> {
    return (client.evalsha(this.sha, 0, args) as Promise<number[]>).catch((err: unknown) => {
      if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
      return client.eval(this.source, 0, args) as Promise<number[]>;
    });
  }
}

/** HIT_LUA's reply for one request → decision; the common answer allocates nothing. */
function toDecision(code: number): RateLimitDecision {
  if (code === 0) return ACCEPTED;
  return code > 0 ? refused(code, false) : refused(-code, true);
}

/**
 * Called once per request, with the decision or, when Redis failed, with the error. Callbacks rather
 * than a promise per request: the hot path then costs no promise and no microtask per request. Must
 * not throw: the callbacks of a batch are called in one loop.
 */
export type HitCallback = (err: unknown, decision?: RateLimitDecision) => void;

/** Requests decided by one script call at most; bounds how long one call holds Redis (~0.5 ms). */
const MAX_BATCH = 256;

/*
 * Batching: a partial batch is sent only while no script call is under way; requests that arrive
 * during a call are sent together when it returns. So under load batches grow with the round trip
 * instead of being one per event-loop turn, and each request's share of the per-call work (a write and
 * a wake-up on both sides, ioredis' command object, the script's set-up: together more than the
 * decisions themselves at a dozen requests per call) shrinks; when idle, a request is sent within two
 * turns of the event loop (see flushNextTurn). A full batch is sent at once, so a burst never waits
 * behind more than one call.
 */

/**
 * The readiness probe: a write under the prefix, from a script, as every request's decision is made. A PING is
 * answered by a Redis that refuses what the limiter does (writes on a read-only replica or one out of memory; scripts
 * to an ACL user without EVAL), and a plain SET is refused to one whose ACL allows only the limiter's keys
 * (`<prefix>{*`) and scripts (review). ARGV[1]: the key.
 */
const PROBE_LUA = `return redis.call('SET', ARGV[1], '1', 'PX', 10000)`;

const hitScript = new LuaScript(HIT_LUA);
const probeScript = new LuaScript(PROBE_LUA);
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
    // Off: the store batches requests into one script call itself; ioredis' auto-pipelining would
    // only add a pipeline object and a tick per call.
    enableAutoPipelining: false,
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

/** Shared store: requests decided by an atomic Lua script on Redis's clock; the limit holds across instances. */
export class RedisRateLimitStore implements RateLimitStore {
  readonly policy: RateLimitPolicy;
  readonly client: Redis;
  readonly keyPrefix: string;
  private readonly testClock: Clock | undefined;
  /** ARGV[1..4] of both scripts. */
  private readonly leadingArgs: string[];
  /** Requests waiting for the next script call: their IPs and callbacks, index for index. */
  private queuedIps: string[] = [];
  private queuedCallbacks: HitCallback[] = [];
  private inFlight = 0;
  private flushScheduled = false;
  /**
   * Redis's clock minus this process's monotonic one, from the last answer's clock and the time its call was sent
   * (undefined until `readClock`, or an answer, after each connection): with the command timeout, it puts each
   * batch's deadline on Redis's clock. Reckoned from the sending, so it is never behind Redis's clock (a call runs
   * after it is sent): at worst a deadline comes later by the time the last call took to reach Redis. Reckoned from
   * the handling of the answer, a busy event loop put it behind by as long as it stalled, and calls Redis ran at
   * once were found late (review).
   */
  private redisClockOffset: number | undefined;
  /** The `readClock` under way, if any. */
  private clockRead: Promise<void> | undefined;

  constructor(options: RedisRateLimitStoreOptions) {
    this.policy = resolvePolicy(options.policy);
    this.client = options.client;
    this.keyPrefix = options.keyPrefix ?? 'svc:rl:';
    this.testClock = options.testClock;
    const { limit, windowMs, blockMs } = this.policy;
    this.leadingArgs = [this.keyPrefix, String(limit), String(windowMs), String(blockMs)];
  }

  /** Whether the connection is up; while it is not, commands fail at once. */
  get ready(): boolean {
    return this.client.status === 'ready';
  }

  /**
   * Whether Redis runs a script that writes under the prefix, as each decision does (PROBE_LUA): where it does
   * not, the limiter falls back, and a PING-based /readyz said ready while each probe ended the fallback for the
   * next request to fall back again (review).
   */
  async takesWrites(): Promise<void> {
    await probeScript.run(this.client, [`${this.keyPrefix}{readyz}`]);
  }

  get unblockChannel(): string {
    return `${this.keyPrefix}unblock`;
  }

  /**
   * Decides one request; `callback` gets the decision, or the error when Redis failed. Requests are
   * decided in arrival order, in batches: those of two event-loop turns, or, while a script call is
   * under way, all that arrived meanwhile (see "Batching" above).
   */
  decide(ip: string, callback: HitCallback): void {
    this.queuedIps.push(ip);
    this.queuedCallbacks.push(callback);
    this.scheduleFlush();
  }

  /** `decide` as a promise (tests, tools); the HTTP path uses `decide`. */
  hit(ip: string): Promise<RateLimitDecision> {
    return new Promise((resolve, reject) => {
      this.decide(ip, (err, decision) => (decision ? resolve(decision) : reject(err)));
    });
  }

  private scheduleFlush(): void {
    const queued = this.queuedIps.length;
    if (this.flushScheduled || queued === 0 || (this.inFlight > 0 && queued < MAX_BATCH)) return;
    this.flushScheduled = true;
    setImmediate(this.flushNextTurn);
  }

  /**
   * Sends at the end of the next turn of the event loop rather than this one: the requests that its
   * poll phase reads join the batch too. That costs an idle loop a few µs; a busy one gets larger
   * batches (in interleaved bench runs 7–16% less redis-server CPU per request, and a req/s ratio to
   * no limiter 0.5–16% higher than when sending at the end of this turn).
   */
  private readonly flushNextTurn = (): void => {
    setImmediate(this.flush);
  };

  private readonly flush = (): void => {
    this.flushScheduled = false;
    while (this.queuedIps.length >= MAX_BATCH || (this.queuedIps.length > 0 && this.inFlight === 0)) {
      let ips = this.queuedIps;
      let callbacks = this.queuedCallbacks;
      if (ips.length > MAX_BATCH) {
        ips = ips.splice(0, MAX_BATCH);
        callbacks = callbacks.splice(0, MAX_BATCH);
      } else {
        this.queuedIps = [];
        this.queuedCallbacks = [];
      }
      this.send(ips, callbacks);
    }
  };

  private send(ips: string[], callbacks: HitCallback[]): void {
    this.inFlight++;
    const now = this.testClock ? String(this.testClock.now()) : '';
    const sentAt = performance.now();
    hitScript.run(this.client, this.leadingArgs.concat(now, this.deadline(sentAt), ips)).then(
      (reply) => {
        this.inFlight--;
        this.redisClockOffset = reply[0]! - sentAt;
        if (reply.length !== callbacks.length + 1) {
          this.failed(
            callbacks,
            new Error('Redis ran the call after its deadline (a stall); it wrote nothing'),
          );
          return;
        }
        this.scheduleFlush();
        for (let i = 0; i < callbacks.length; i++) callbacks[i]!(undefined, toDecision(reply[i + 1]!));
      },
      (err: unknown) => {
        this.inFlight--;
        this.failed(callbacks, err);
      },
    );
  }

  /**
   * HIT_LUA's deadline for a batch sent at `sentAt`: twice the command timeout later on Redis's clock, or none
   * while that clock is not known. Twice: the timeout's timer fires late on a busy event loop, and a batch found late
   * while its answer is still awaited is decided from memory, as one that timed out is.
   */
  private deadline(sentAt: number): string {
    const timeout = this.client.options.commandTimeout;
    if (timeout === undefined || this.redisClockOffset === undefined) return '';
    return String(Math.ceil(sentAt + this.redisClockOffset + 2 * timeout));
  }

  /**
   * Reads Redis's clock (TIME), so that the batches sent from now on carry a deadline: the limiter calls it once
   * connected, at the start and at each reconnection. Without it, the calls an instance sent before its first
   * answer (one started while Redis hung) were counted twice all the same (review).
   */
  readClock(): Promise<void> {
    // One TIME at a time: the start's wait shares the read its 'ready' asked for.
    this.clockRead ??= (async () => {
      const sentAt = performance.now();
      const [seconds, micros] = await this.client.time();
      this.redisClockOffset = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000) - sentAt;
    })().finally(() => (this.clockRead = undefined));
    return this.clockRead;
  }

  /** The connection is lost: the Redis it reconnects to (another, after a failover) may keep another time. */
  forgetClock(): void {
    this.redisClockOffset = undefined;
    // A read under way is not shared after a reconnection: its send time is from before the outage (review).
    this.clockRead = undefined;
  }

  /**
   * Redis failed (down, slower than the command timeout, or late): the requests waiting for the next call are
   * decided without it too, rather than each waiting for another failure.
   */
  private failed(callbacks: HitCallback[], err: unknown): void {
    const waiting = this.queuedCallbacks;
    this.queuedIps = [];
    this.queuedCallbacks = [];
    for (const callback of callbacks) callback(err);
    for (const callback of waiting) callback(err);
  }

  async inspect(ip: string): Promise<RateLimitState> {
    const now = this.testClock ? String(this.testClock.now()) : '';
    const [count, blockedUntil, redisNow] = await inspectScript.run(
      this.client,
      this.leadingArgs.concat(now, ip),
    );
    return rateLimitState(ip, this.policy, count!, blockedUntil === -1 ? null : blockedUntil!, redisNow!);
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
   * Redis is reachable (however long that takes) and resubscribes after reconnects. `subscribed` settles
   * once it is active, or once it is closed before that.
   */
  subscribeUnblocks(
    onUnblock: (ip: string) => void,
    /** Subscribed again after a disconnection: unblocks published meanwhile were missed. */
    onResubscribed: () => void = () => {},
  ): { subscribed: Promise<void>; close: () => void } {
    // Subscribed again on every reconnection by us, not by ioredis' autoResubscribe: that SUBSCRIBE has no
    // rejection handler, so closing while it was in flight (a shutdown just after a reconnect) was an
    // unhandled rejection.
    const subscriber = this.client.duplicate({
      enableOfflineQueue: true,
      // The limiter's connection fails a command at the first failed connection attempt (maxRetriesPerRequest
      // 0); here the SUBSCRIBE must wait for Redis, or an instance started during an outage never subscribed.
      maxRetriesPerRequest: null,
      // Nor is it cut short after the limiter's command timeout while it waits.
      commandTimeout: undefined,
      lazyConnect: false,
      autoResubscribe: false,
    });
    subscriber.on('error', () => {}); // the service reports Redis trouble through the main connection
    subscriber.on('message', (channel: string, ip: string) => {
      if (channel === this.unblockChannel) onUnblock(ip);
    });
    // Fails only when the connection closes first; a later reconnection subscribes again.
    const subscribe = () =>
      subscriber.subscribe(this.unblockChannel).then(
        () => undefined,
        () => undefined,
      );
    // The first one waits in the offline queue until Redis is reachable.
    const subscribed = subscribe();
    let connectedBefore = false;
    subscriber.on('ready', () => {
      if (connectedBefore) void subscribe().then(onResubscribed);
      connectedBefore = true;
    });
    return { subscribed, close: () => subscriber.disconnect() };
  }

  /** The IP's keys as the scripts name them. */
  private keys(ip: string): [string, string] {
    const base = `${this.keyPrefix}{${ip}}:`;
    return [`${base}log`, `${base}block`];
  }
}
