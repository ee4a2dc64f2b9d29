/**
 * Redis store specifics against the real Redis at REDIS_URL (issue 3 "Must show" 3 and 5): one round
 * trip per request and none for a blocked IP, Redis's own clock shared by skewed instances, unblock
 * reaching every instance, bounded keys, and the fallback to memory and back.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { ManualClock } from '../../src/lib/clock.ts';
import { registerRateLimitMetrics } from '../../src/domain/ratelimit/rate-limit.metrics.ts';
import {
  createRateLimiter,
  RateLimiterService,
  RedisDatabaseError,
} from '../../src/domain/ratelimit/rate-limiter.service.ts';
import {
  RedisRateLimitStore,
  rateLimitRedisOptions,
} from '../../src/domain/ratelimit/redis-rate-limit.store.ts';
import type { RateLimitDecision, RateLimitLogger } from '../../src/domain/ratelimit/rate-limiter.ts';
import { startOwnRedis } from '../helpers/own-redis.ts';
import { startRedisMonitor } from '../helpers/redis-monitor.ts';
import { startTcpProxy } from '../helpers/tcp-proxy.ts';
import { dropKeysAndDisconnect } from '../helpers/redis-keys.ts';

const REDIS_URL = process.env.REDIS_URL;
const SKIP = REDIS_URL ? false : 'REDIS_URL not set: Redis-backed rate limiter not tested';
const runPrefix = `test:rl:${process.pid}:${randomUUID()}:`;

let redis: Redis | undefined;
function client(): Redis {
  // A long command timeout: a test process stalled on a busy machine must not turn into a fallback.
  redis ??= new Redis(
    REDIS_URL!,
    rateLimitRedisOptions({ lazyConnect: false, enableOfflineQueue: true, commandTimeout: 10_000 }),
  );
  return redis;
}

after(async () => {
  if (!redis) return;
  await dropKeysAndDisconnect(redis, `${runPrefix}*`);
});

function freshPrefix(): string {
  return `${runPrefix}${randomUUID()}:`;
}

async function hit(limiter: RateLimiterService, ip: string, n: number): Promise<RateLimitDecision[]> {
  return Promise.all(Array.from({ length: n }, () => limiter.check(ip)));
}

const accepted = (ds: RateLimitDecision[]) => ds.filter((d) => d.allowed).length;

/** A limiter started on `redisUrl` decides in Redis, not from memory. */
async function assertStartsShared(redisUrl: string, ip: string): Promise<void> {
  const limiter = await createRateLimiter({ redisUrl, clock: new ManualClock(), keyPrefix: freshPrefix() });
  try {
    assert.equal((await limiter.check(ip)).allowed, true);
    assert.equal(limiter.fallbackActive, false);
  } finally {
    await limiter.close();
  }
}

/** Waits for an asynchronous event (a pub/sub delivery) to show, without a fixed sleep. */
async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

class CapturingLogger implements RateLimitLogger {
  readonly warns: string[] = [];
  readonly warnFields: object[] = [];
  readonly infos: string[] = [];
  warn(obj: object, msg?: string): void {
    this.warns.push(msg ?? '');
    this.warnFields.push(obj);
  }
  info(_obj: object, msg?: string): void {
    this.infos.push(msg ?? '');
  }
}

/**
 * A limiter (a manual clock, its log captured, a call given up on after 300 ms) whose Redis connection goes through a
 * relay that can hold Redis's replies, as a Redis that hangs; `close` releases the relay and closes both.
 */
async function limiterBehindHoldingRelay() {
  const relay = await startReplyHoldingRelay(REDIS_URL!);
  const clock = new ManualClock();
  const logger = new CapturingLogger();
  const limiter = await createRateLimiter({
    redisUrl: relay.url,
    logger,
    clock,
    keyPrefix: freshPrefix(),
    redisOptions: { commandTimeout: 300 },
  });
  const close = async () => {
    relay.release();
    await limiter.close();
    await relay.close();
  };
  return { relay, clock, logger, limiter, close };
}

/** Counts, via MONITOR, the rate-limit script calls Redis runs for one key prefix and the requests they decide. */
/**
 * A store whose Redis connections go to `url` (a relay the test can cut), retrying every 20 ms, with its
 * unblock subscriber (the store's duplicate of its client) caught to watch its reconnections.
 */
function storeBehind(url: string) {
  const store = new RedisRateLimitStore({
    client: new Redis(url, rateLimitRedisOptions({ retryStrategy: () => 20 })),
    keyPrefix: freshPrefix(),
  });
  let subscriber: Redis | undefined;
  const duplicate = store.client.duplicate.bind(store.client);
  store.client.duplicate = (options) => (subscriber = duplicate(options));
  return {
    store,
    subscriber: () => {
      if (!subscriber) throw new Error('the store has not subscribed yet');
      return subscriber;
    },
  };
}

async function monitorScripts(prefix: string) {
  const seen = { calls: 0, decisions: 0 };
  let marker = '';
  const monitor = await startRedisMonitor(REDIS_URL!, (args) => {
    // EVALSHA sha|script 0 prefix limit window block now deadline ip…: one IP per request decided.
    const [command] = args;
    if ((command === 'evalsha' || command === 'eval') && args[3] === prefix) {
      seen.calls++;
      seen.decisions += args.length - 9;
    }
    if (command === 'echo') marker = args[1] ?? '';
  });
  return {
    /** What Redis has run so far, once everything sent before has reached MONITOR. */
    async seen(): Promise<{ calls: number; decisions: number }> {
      const token = `${prefix}${randomUUID()}`;
      await client().echo(token);
      await until(() => marker === token, 'MONITOR to catch up');
      return { ...seen };
    },
    close: () => monitor.close(),
  };
}

/**
 * A TCP relay to Redis that can hold Redis's replies back (commands still reach Redis at once), so a
 * test can keep a script call "under way" for as long as it needs, without timing.
 */
async function startReplyHoldingRelay(redisUrl: string) {
  const target = new URL(redisUrl);
  const sockets = new Set<Socket>();
  let held: Array<[Socket, Buffer]> | null = null;
  let cut = false;
  const server = createServer((downstream) => {
    if (cut) {
      downstream.destroy();
      return;
    }
    const upstream = connect(Number(target.port || 6379), target.hostname);
    sockets.add(downstream).add(upstream);
    downstream.pipe(upstream);
    upstream.on('data', (chunk: Buffer) => (held ? held.push([downstream, chunk]) : downstream.write(chunk)));
    downstream.on('error', () => upstream.destroy());
    upstream.on('error', () => downstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = new URL(redisUrl);
  url.hostname = '127.0.0.1';
  url.port = String((server.address() as { port: number }).port);
  return {
    url: url.toString(),
    hold: () => {
      held = [];
    },
    release: () => {
      const chunks = held ?? [];
      held = null;
      for (const [downstream, chunk] of chunks) downstream.write(chunk);
    },
    /** Drops every connection and refuses new ones until `resume`: Redis "goes away". */
    cut: () => {
      cut = true;
      for (const socket of sockets) socket.destroy();
      sockets.clear();
    },
    resume: () => {
      cut = false;
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe('Redis rate-limit store', { skip: SKIP }, () => {
  it('decides each request in Redis once, at most one call per request, none while blocked', async () => {
    const prefix = freshPrefix();
    const clock = new ManualClock();
    const shared = new RedisRateLimitStore({ client: client(), keyPrefix: prefix, testClock: clock });
    const limiter = new RateLimiterService({ shared, clock, sweepIntervalMs: false });
    await shared.hit('192.0.2.255'); // Redis has the script cached: no NOSCRIPT + EVAL pair below
    const monitor = await monitorScripts(prefix);
    try {
      const ip = '203.0.113.50';
      assert.equal(accepted(await hit(limiter, ip, 2001)), 2000);
      assert.equal(limiter.stats.sharedErrors, 0, 'every decision came from Redis');
      const first = await monitor.seen();
      assert.equal(first.decisions, 2001, 'each request decided by Redis exactly once');
      // Requests of the same event-loop turn share one call (at most 256 each).
      assert.ok(first.calls >= 8 && first.calls <= 2001, `${first.calls} script calls`);

      clock.advance(3_000);
      assert.equal(accepted(await hit(limiter, ip, 1000)), 0);
      assert.deepEqual(await monitor.seen(), first, 'refusals during the block never reach Redis');
      assert.equal(limiter.stats.cachedRefusals, 1000);

      clock.advance(7_000);
      assert.equal(accepted(await hit(limiter, ip, 1)), 1);
      assert.deepEqual(
        await monitor.seen(),
        { calls: first.calls + 1, decisions: 2002 },
        'after the block Redis is asked again, one call for one request',
      );
    } finally {
      monitor.close();
      await limiter.close();
    }
  });

  it('sends the requests that arrive while a call is under way together, in the next call', async () => {
    const relay = await startReplyHoldingRelay(REDIS_URL!);
    const relayed = new Redis(
      relay.url,
      rateLimitRedisOptions({ lazyConnect: false, enableOfflineQueue: true, commandTimeout: 10_000 }),
    );
    const prefix = freshPrefix();
    const shared = new RedisRateLimitStore({
      client: relayed,
      keyPrefix: prefix,
      testClock: new ManualClock(),
    });
    await shared.hit('192.0.2.255'); // Redis has the script cached: no NOSCRIPT + EVAL pair below
    const monitor = await monitorScripts(prefix);
    try {
      relay.hold();
      const first = shared.hit('203.0.113.60');
      // Bounded polling: the call crosses the relay and reaches Redis, whose answer is held back.
      const deadline = Date.now() + 5_000;
      while ((await monitor.seen()).calls === 0) assert.ok(Date.now() < deadline, 'first call never sent');
      // Five more requests, each in its own turns of the event loop, while that call has no answer yet.
      const later: Array<Promise<RateLimitDecision>> = [];
      for (let i = 0; i < 5; i++) {
        later.push(shared.hit(`203.0.113.${61 + i}`));
        for (let turn = 0; turn < 3; turn++) await new Promise((resolve) => setImmediate(resolve));
      }
      relay.release();
      assert.ok((await first).allowed);
      assert.equal(accepted(await Promise.all(later)), 5);
      // Every call has run (their answers are in): one for the first request, one for the five.
      assert.deepEqual(await monitor.seen(), { calls: 2, decisions: 6 });
    } finally {
      monitor.close();
      relayed.disconnect();
      await relay.close();
    }
  });

  it('decides a batch in arrival order, several IPs and repeats of one IP in one call', async () => {
    const clock = new ManualClock();
    const shared = new RedisRateLimitStore({
      client: client(),
      keyPrefix: freshPrefix(),
      testClock: clock,
      policy: { limit: 3, windowMs: 1_000, blockMs: 5_000 },
    });
    // Same turn of the event loop: one script call for all nine.
    const ips = ['a', 'b', 'a', 'a', 'c', 'a', 'b', 'a', 'b'].map((x) => `198.18.0.${x.charCodeAt(0)}`);
    const decisions = await Promise.all(ips.map((ip) => shared.hit(ip)));
    assert.deepEqual(
      decisions.map((d) => (d.allowed ? 'ok' : d.blockStarted ? 'block' : 'refused')),
      ['ok', 'ok', 'ok', 'ok', 'ok', 'block', 'ok', 'refused', 'ok'],
    );
  });

  it('takes accepts from before an ended block for stale, but not those made after it', async () => {
    const clock = new ManualClock();
    const prefix = freshPrefix();
    const shared = new RedisRateLimitStore({
      client: client(),
      keyPrefix: prefix,
      testClock: clock,
      policy: { limit: 3, windowMs: 1_000, blockMs: 200 },
    });
    const ip = '198.18.1.1';
    const verdicts = async (n: number) =>
      (await Promise.all(Array.from({ length: n }, () => shared.hit(ip)))).map((d) =>
        d.allowed ? 'ok' : d.blockStarted ? 'block' : 'refused',
      );
    assert.deepEqual(await verdicts(4), ['ok', 'ok', 'ok', 'block']);
    clock.advance(300);
    // The log expires with the block on Redis's real clock while the block key may outlive it briefly:
    // the accepts made then must not be cleared when the stale block key is found later.
    await client().del(`${prefix}{${ip}}:log`);
    assert.deepEqual(await verdicts(3), ['ok', 'ok', 'ok']);
    assert.deepEqual(await verdicts(2), ['block', 'refused'], 'three accepts inside the window count');
    // And with the log kept (the usual case), the first request after the block clears it.
    clock.advance(200);
    assert.deepEqual(await verdicts(4), ['ok', 'ok', 'ok', 'block']);
  });

  it('uses Redis TIME: instances with clocks an hour apart share one exact limit', async () => {
    const prefix = freshPrefix();
    // No testClock: the scripts read Redis TIME. The instances' own clocks only time their caches.
    const a = new RateLimiterService({
      shared: new RedisRateLimitStore({ client: client(), keyPrefix: prefix }),
      clock: new ManualClock(Date.now()),
      sweepIntervalMs: false,
    });
    const b = new RateLimiterService({
      shared: new RedisRateLimitStore({ client: client(), keyPrefix: prefix }),
      clock: new ManualClock(Date.now() + 3_600_000),
      sweepIntervalMs: false,
    });
    try {
      await Promise.all([a.unblockSubscription, b.unblockSubscription]);
      const ip = '203.0.113.51';
      // Sent well inside 10 s of real time, alternating instances.
      const results: RateLimitDecision[] = [];
      for (let i = 0; i < 2001; i += 100) {
        const n = Math.min(100, 2001 - i);
        results.push(...(await hit(i % 200 === 0 ? a : b, ip, n)));
      }
      assert.equal(a.stats.sharedErrors + b.stats.sharedErrors, 0, 'every decision came from Redis');
      assert.equal(accepted(results), 2000);
      const breach = results[2000]!;
      assert.equal(breach.blockStarted, true);
      assert.equal(breach.retryAfterMs, 10_000);
      assert.equal((await a.check(ip)).allowed, false);
      assert.equal((await b.check(ip)).allowed, false);
      const state = await b.inspect(ip);
      assert.equal(state.blocked, true);
      assert.equal(state.count, 2000);
      // blocked_until is on Redis's clock, not on either instance's.
      const [seconds] = await client().time();
      assert.ok(Math.abs(state.blocked_until! - 10_000 - Number(seconds) * 1000) < 5_000);

      // An unblock on one instance reaches the other's cache through pub/sub.
      assert.equal(b.cachedBlocks, 1);
      await a.unblock(ip);
      await until(() => b.cachedBlocks === 0, 'the unblock to reach instance b');
      assert.equal((await b.check(ip)).allowed, true);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('keeps each IP bounded in Redis: at most `limit` entries, expiring after the window', async () => {
    const prefix = freshPrefix();
    const clock = new ManualClock();
    const shared = new RedisRateLimitStore({ client: client(), keyPrefix: prefix, testClock: clock });
    const ip = '203.0.113.52';
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 1000; i++) await shared.hit(ip);
      clock.advance(6_000);
    }
    const log = `${prefix}{${ip}}:log`;
    assert.equal(await client().llen(log), 2000);
    const bytes = Number(await client().memory('USAGE', log));
    assert.ok(bytes < 30 * 1024, `log of 2,000 accepts uses ${bytes} B`);
    const ttl = await client().pttl(log);
    assert.ok(ttl > 0 && ttl <= 10_000, `log expires ${ttl} ms after the last accept`);
  });

  it('refuses to start on a database the Redis does not have, rather than share the limit in database 0', async () => {
    // ioredis only emits an error when the URL's database cannot be selected, and goes on in database 0.
    const url = new URL(REDIS_URL!);
    url.pathname = '/99';
    const refusedLog = new CapturingLogger();
    // Closed if it starts after all, so that the failure is the assertion's, not a process kept alive.
    const started = createRateLimiter({
      redisUrl: url.href,
      logger: refusedLog,
      clock: new ManualClock(),
      keyPrefix: freshPrefix(),
    });
    await assert.rejects(
      started.then((limiter) => limiter.close()),
      (err: unknown) =>
        err instanceof RedisDatabaseError &&
        /^Redis refused SELECT 99 \(ERR DB index is out of range\)/.test(err.message),
    );
    // The start stops: no outage to limit in memory through, so none is said (review: the dropped connection warned).
    assert.deepEqual(refusedLog.warns, []);
    // Down at the start, then up: met at the connection, which is dropped; this instance limits in memory.
    const relay = await startTcpProxy(REDIS_URL!);
    await relay.down();
    const late = new URL(relay.url);
    late.pathname = '/99';
    const logger = new CapturingLogger();
    const prefix99 = freshPrefix();
    const limiter99 = await createRateLimiter({
      redisUrl: late.href,
      logger,
      clock: new ManualClock(),
      keyPrefix: prefix99,
    });
    try {
      await relay.up();
      await until(
        () => logger.warns.some((w) => w.includes("REDIS_URL's database is refused")),
        'the refusal heard',
      );
      // Dropped before it was ready: never said to be back, nothing decided in database 0.
      assert.deepEqual(logger.infos, []);
      assert.equal(await limiter99.sharedReachable(), false);
      const decided = await limiter99.check('203.0.113.98');
      assert.equal(decided.allowed, true);
      assert.equal(limiter99.fallbackActive, true, 'decided from memory');
      assert.deepEqual(await client().keys(`${prefix99}*`), [], 'no key in database 0');
    } finally {
      await limiter99.close();
      await relay.close();
    }
    url.pathname = '/1';
    await assertStartsShared(url.href, '203.0.113.99');
  });

  it('closing while a TLS connection to it is being made leaves nothing unheard (rediss:// to a Redis without TLS)', async (t) => {
    // ioredis printed "[ioredis] Unhandled error event: … before secure TLS connection was established" and its
    // stack once the limiter had closed: its error listener went before the connection did.
    const printed: unknown[] = [];
    t.mock.method(console, 'error', (...args: unknown[]) => printed.push(args[0]));
    const url = new URL(REDIS_URL!);
    url.protocol = 'rediss:';
    for (let round = 0; round < 3; round++) {
      const redisClient = new Redis(url.href, rateLimitRedisOptions());
      const shared = new RedisRateLimitStore({ client: redisClient, keyPrefix: freshPrefix() });
      const limiter = new RateLimiterService({ shared, ownsSharedClient: true, sweepIntervalMs: false });
      await redisClient.connect().catch(() => {});
      // Connecting again (each attempt fails its handshake): the close comes while one is under way.
      await until(() => redisClient.status === 'connecting', 'a connection attempt');
      await limiter.close();
      await until(() => redisClient.status === 'end', 'the connection to end');
    }
    assert.deepEqual(printed, []);
  });

  it('falls back to memory when Redis is unreachable: limited, never throws, logged once', async () => {
    const logger = new CapturingLogger();
    const registry = new Registry();
    const limiter = await createRateLimiter({
      redisUrl: 'redis://user:hunter2@127.0.0.1:1/3',
      logger,
      clock: new ManualClock(),
      keyPrefix: freshPrefix(),
    });
    registerRateLimitMetrics(registry, limiter);
    try {
      // Said at start, with where (no password) and why in words, not at the first request with ioredis's
      // "Stream isn't writeable and enableOfflineQueue options is false" (review).
      assert.deepEqual(logger.warns, [
        'rate limit: Redis unavailable, limiting with the in-memory store of this instance',
      ]);
      const fields = logger.warnFields[0] as { redis?: string; err?: string };
      assert.equal(fields.redis, 'redis://127.0.0.1:1/3');
      assert.match(fields.err ?? '', /ECONNREFUSED/);
      const ip = '203.0.113.53';
      const results = await hit(limiter, ip, 2100);
      assert.equal(accepted(results), 2000, 'the in-memory limit applies');
      assert.equal(limiter.fallbackActive, true);
      assert.deepEqual(logger.warns, [
        'rate limit: Redis unavailable, limiting with the in-memory store of this instance',
      ]);
      const metrics = await registry.metrics();
      assert.match(metrics, /^svc_rate_limit_fallback_active 1$/m);
      assert.match(metrics, /^svc_rate_limit_fallbacks_total 1$/m);
      assert.match(metrics, /^svc_rate_limit_refused_total 100$/m);
      assert.equal((await limiter.inspect(ip)).blocked, true, 'the operator sees the memory state');
      // The block Redis may hold for every instance could not be lifted: a retryable 503, not "lifted";
      // this instance's memory is cleared all the same.
      await assert.rejects(limiter.unblock(ip), /could not be lifted in Redis/);
      assert.equal((await limiter.check(ip)).allowed, true);
    } finally {
      await limiter.close();
    }
  });

  it('hears unblocks when Redis was unreachable as it started, once Redis is back', async () => {
    // An instance started during a Redis outage: its first SUBSCRIBE must wait for Redis, not be dropped at
    // the first failed connection attempt (the limiter's connection fails commands fast), or every unblock
    // of its process's life goes unheard and it keeps refusing an IP the operator let go.
    const relay = await startTcpProxy(REDIS_URL!);
    await relay.down();
    const { store, subscriber } = storeBehind(relay.url);
    const heard: string[] = [];
    const subscription = store.subscribeUnblocks((ip) => heard.push(ip));
    try {
      // Its connection attempts fail meanwhile (the relay refuses them); then Redis is reachable.
      // (Not events.once: the failed attempt's 'error' event would reject it.)
      await new Promise((resolve) => subscriber().once('reconnecting', resolve));
      await relay.up();
      await subscription.subscribed;
      const deadline = Date.now() + 5_000;
      while ((await client().publish(store.unblockChannel, '198.51.100.8')) === 0) {
        if (Date.now() > deadline) throw new Error('timed out: nobody subscribed to the unblocks');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      await until(() => heard.includes('198.51.100.8'), 'the unblock');
    } finally {
      subscription.close();
      store.client.disconnect();
      await relay.close();
    }
  });

  it('hears unblocks again after a reconnect; closing just as it reconnects leaves no unhandled rejection', async () => {
    const relay = await startTcpProxy(REDIS_URL!);
    const { store, subscriber } = storeBehind(relay.url);
    const heard: string[] = [];
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    const subscription = store.subscribeUnblocks((ip) => heard.push(ip));
    const reconnect = async (onReady: () => void = () => {}) => {
      const ready = once(subscriber(), 'ready').then(onReady);
      await relay.down();
      await relay.up(); // same port: ioredis reconnects by itself
      await ready;
    };
    try {
      await subscription.subscribed;
      await reconnect();
      // Another instance's unblock, published until the subscription is back and hears it.
      const deadline = Date.now() + 5_000;
      while ((await client().publish(store.unblockChannel, '198.51.100.7')) === 0) {
        if (Date.now() > deadline) throw new Error('timed out waiting for the subscription to return');
      }
      await until(() => heard.includes('198.51.100.7'), 'the unblock after the reconnect');

      // Closed the moment the connection is back, while its SUBSCRIBE is under way (a shutdown then).
      const ended = once(subscriber(), 'end');
      await reconnect(() => subscription.close());
      await ended;
      for (let turn = 0; turn < 3; turn++) await new Promise((resolve) => setImmediate(resolve));
      assert.deepEqual(unhandled, [], 'no unhandled rejection');
    } finally {
      process.off('unhandledRejection', onUnhandled);
      subscription.close();
      store.client.disconnect();
      await relay.close();
    }
  });

  it('in fallback, no request waits for a Redis that may be back: one probe at a time asks it in the background', async () => {
    // A Redis that is slow rather than down stays "ready": every request asking it would wait for the timeout,
    // and while the probe was a request, one per back-off did (probe: 1 s added to every fifth request).
    const { relay, clock, limiter, close } = await limiterBehindHoldingRelay();
    try {
      const ip = '203.0.113.60';
      assert.equal((await limiter.check(ip)).allowed, true, 'decided by Redis');
      relay.hold();
      assert.equal((await limiter.check(ip)).allowed, true, 'decided from memory after the timeout');
      assert.equal(limiter.fallbackActive, true);
      clock.advance(1_000); // the back-off has passed: Redis may be asked again
      // Counted as they are made: the probe is the readiness script, asked of the real Redis behind the relay.
      const shared = limiter.shared!;
      const takesWrites = shared.takesWrites.bind(shared);
      let probes = 0;
      shared.takesWrites = () => {
        probes++;
        return takesWrites();
      };
      const decisions = Array.from({ length: 50 }, () => limiter.check(ip));
      assert.ok(
        decisions.every((d) => !(d instanceof Promise) && d.allowed),
        'all 50 decided at once from memory',
      );
      assert.equal(probes, 1, 'one probe, not one per request');
      assert.equal(limiter.fallbackActive, true, 'still in fallback while the probe waits');
      relay.release();
      await until(() => !limiter.fallbackActive, 'the probe to get through: the shared limit is back');
      const next = limiter.check(ip);
      assert.ok(next instanceof Promise, 'decided by Redis again');
      assert.equal((await next).allowed, true);
    } finally {
      await close();
    }
  });

  it('a Redis that stalled and answers again ends the fallback at the readiness probe, with no request', async () => {
    // Review: a stall is no disconnect, so no 'ready' came; an idle instance kept
    // svc_rate_limit_fallback_active 1 (and logged no recovery) while /readyz said redis: true.
    const { relay, logger, limiter, close } = await limiterBehindHoldingRelay();
    try {
      relay.hold();
      assert.equal(
        (await limiter.check('203.0.113.61')).allowed,
        true,
        'decided from memory after the timeout',
      );
      assert.equal(limiter.fallbackActive, true);
      relay.release();
      assert.equal(await limiter.sharedReachable(), true);
      assert.equal(limiter.fallbackActive, false, 'the probe got through: the shared limit is back');
      assert.deepEqual(logger.infos, ['rate limit: Redis is back, the shared limit applies again']);
    } finally {
      await close();
    }
  });

  it('a Redis that stalls is an outage at the readiness probe, with no request: fallback active and logged', async () => {
    // Probe: an idle instance whose Redis hung (or took no writes) said redis: false and degraded on /readyz, while
    // svc_rate_limit_fallback_active stayed 0 and nothing was logged, until a public request met the stall.
    const { relay, logger, limiter, close } = await limiterBehindHoldingRelay();
    try {
      assert.equal(limiter.fallbackActive, false);
      relay.hold();
      assert.equal(await limiter.sharedReachable(), false);
      assert.equal(limiter.fallbackActive, true, 'the probe found the outage: the metric says so');
      assert.deepEqual(logger.warns, [
        'rate limit: Redis unavailable, limiting with the in-memory store of this instance',
      ]);
      assert.equal(limiter.stats.sharedErrors, 0, 'a failed probe is no failed decision');
      relay.release();
      assert.equal(await limiter.sharedReachable(), true);
      assert.equal(limiter.fallbackActive, false);
    } finally {
      await close();
    }
  });

  it('a call Redis runs after the instance gave up on it writes nothing: its requests were decided from memory', async () => {
    // Review: a Redis that hung with a call written to it ran the call when it woke, stamping its requests with
    // that time: counted twice (from memory when the call timed out, then in Redis), they blocked an IP that had
    // never gone over the limit. CLIENT PAUSE holds the call as a hung Redis does. The instance has decided nothing
    // before: it read Redis's clock as it connected (review: the first calls went without a deadline).
    const own = await startOwnRedis();
    // Another instance had Redis cache the script: else the held call, run by its digest, fails NOSCRIPT and writes
    // nothing anyway.
    const other = await createRateLimiter({ redisUrl: own.url, keyPrefix: 'rl:' });
    assert.equal((await other.check('203.0.113.71')).allowed, true);
    await other.close();
    const limiter = await createRateLimiter({
      redisUrl: own.url,
      policy: { limit: 20, windowMs: 60_000, blockMs: 60_000 },
      keyPrefix: 'rl:',
      redisOptions: { commandTimeout: 200 },
    });
    const ip = '203.0.113.70';
    try {
      assert.equal(limiter.fallbackActive, false);
      await own.command('client', 'pause', '1500', 'ALL');
      const during = await hit(limiter, ip, 8);
      assert.equal(accepted(during), 8);
      assert.equal(limiter.fallbackActive, true, 'the call timed out: decided from memory');
      // When the pause ends, Redis runs the held call, then the probe, which ends the fallback.
      while (!(await limiter.sharedReachable())) await new Promise((r) => setTimeout(r, 50));
      assert.equal(limiter.fallbackActive, false);

      const afterwards = await hit(limiter, ip, 15);
      assert.equal(accepted(afterwards), 15, 'fewer than the limit: every one accepted');
      assert.equal((await limiter.inspect(ip)).count, 15, 'the 8 decided from memory are not in Redis');
    } finally {
      await limiter.close();
      await own.stop();
    }
  });

  it('an answer handled late (a busy event loop) does not make the calls Redis runs at once look late', async () => {
    // Review: Redis's clock was reckoned from when an answer was handled; after a stall of the event loop it was put
    // behind by the stall, and the next calls, answered in a millisecond, were found late: a fallback, logged as an
    // outage. The stall is played by this process's monotonic clock running 500 ms ahead while an answer is handled.
    const limiter = await createRateLimiter({
      redisUrl: REDIS_URL!,
      keyPrefix: freshPrefix(),
      redisOptions: { commandTimeout: 200 },
    });
    const monotonic = performance.now.bind(performance);
    let stalled = 0;
    performance.now = () => monotonic() + stalled;
    const connection = limiter.shared!.client;
    const evalsha = connection.evalsha.bind(connection) as (...args: unknown[]) => Promise<unknown>;
    (connection as unknown as { evalsha: typeof evalsha }).evalsha = (...args) =>
      evalsha(...args).then((reply) => {
        stalled = 500;
        setImmediate(() => (stalled = 0));
        return reply;
      });
    try {
      for (let i = 0; i < 3; i++) assert.equal((await limiter.check('203.0.113.73')).allowed, true);
      assert.equal(limiter.stats.sharedErrors, 0, 'every call decided in Redis');
      assert.equal(limiter.fallbackActive, false);
    } finally {
      performance.now = monotonic;
      await limiter.close();
    }
  });

  it('a call found late while its answer is still awaited is decided from memory, as one that timed out', async () => {
    // The deadline is on Redis's clock as the instance last saw it; an answer it finds late wrote nothing.
    const prefix = freshPrefix();
    const store = new RedisRateLimitStore({ client: client(), keyPrefix: prefix, policy: { limit: 5 } });
    const limiter = new RateLimiterService({
      shared: store,
      sweepIntervalMs: false,
      retrySharedAfterMs: 60_000,
    });
    try {
      assert.equal((await limiter.check('203.0.113.72')).allowed, true);
      assert.equal(limiter.fallbackActive, false);
      // As if Redis's clock had been read a day behind: every deadline is past when the call runs.
      (store as unknown as { redisClockOffset: number }).redisClockOffset -= 86_400_000;
      assert.equal((await limiter.check('203.0.113.72')).allowed, true);
      assert.equal(limiter.fallbackActive, true);
      assert.equal((await store.inspect('203.0.113.72')).count, 1, 'the late call wrote nothing');
      // Its answer told Redis's clock again: the next call is on time.
      assert.equal(await limiter.sharedReachable(), true);
      assert.equal((await limiter.check('203.0.113.72')).allowed, true);
      assert.equal((await store.inspect('203.0.113.72')).count, 2);
    } finally {
      await limiter.close();
    }
  });

  it('refuses to start where Redis refuses the credentials (none, a wrong password, an unknown user), never naming them', async () => {
    // Probe: with database 0 this was an outage, the instance limiting alone in memory for good; with /3, a refused
    // SELECT. Those are a configuration to mend.
    const secured = await startOwnRedis(['--requirepass', 'right-pw'], { password: 'right-pw' });
    try {
      const at = (auth: string, database: string) =>
        secured.url.replace('redis://', `redis://${auth}`) + database;
      for (const [url, reply] of [
        [at('', ''), /^NOAUTH /],
        [at('', '/3'), /^NOAUTH /],
        [at(':wrong-pw@', ''), /^WRONGPASS /],
        [at(':wrong-pw@', '/3'), /^WRONGPASS /],
        [at('nobody:wrong-pw@', '/0'), /^WRONGPASS /],
      ] as const) {
        const logger = new CapturingLogger();
        await assert.rejects(
          createRateLimiter({
            redisUrl: url,
            logger,
            clock: new ManualClock(),
            keyPrefix: freshPrefix(),
          }).then((limiter) => limiter.close()),
          (err: unknown) => {
            assert.ok(err instanceof RedisDatabaseError, String(err));
            const [, said] = /^Redis refused the credentials \((.*)\)$/.exec(err.message) ?? [];
            assert.match(said ?? err.message, reply, url);
            assert.doesNotMatch(err.message, /wrong-pw|right-pw/);
            return true;
          },
        );
        assert.deepEqual(logger.warns, [], 'no outage said: the start stops');
      }
      // Given them, it starts and shares the limit.
      await assertStartsShared(at(':right-pw@', '/3'), '203.0.113.97');
    } finally {
      await secured.stop();
    }
  });

  it('credentials refused after the start are an outage that ends when they match again, in any database', async () => {
    // The password changed on Redis before the instances were given it: limited in memory meanwhile, then shared
    // again without a restart (a refused SELECT would have dropped the connection for good: NOAUTH comes to it).
    const secured = await startOwnRedis(['--requirepass', 'first-pw'], { password: 'first-pw' });
    const logger = new CapturingLogger();
    const limiter = await createRateLimiter({
      redisUrl: secured.url.replace('redis://', 'redis://:first-pw@') + '/3',
      logger,
      clock: new ManualClock(),
      keyPrefix: freshPrefix(),
      redisOptions: { retryStrategy: () => 20 },
    });
    try {
      assert.equal(await limiter.sharedReachable(), true);
      await secured.command('config', 'set', 'requirepass', 'second-pw');
      await secured.command('auth', 'second-pw');
      await secured.command('client', 'kill', 'type', 'normal', 'skipme', 'yes');
      // Until a reconnection has been refused (Redis logs each refused AUTH), not only the connection lost.
      const refusals = async () => ((await secured.command('acl', 'log')) as unknown[]).length;
      const deadline = Date.now() + 10_000;
      while ((await refusals()) === 0 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      assert.ok((await refusals()) > 0, 'a reconnection was refused');
      assert.equal(limiter.fallbackActive, true);
      assert.equal(await limiter.sharedReachable(), false);
      await secured.command('config', 'set', 'requirepass', 'first-pw');
      let back = false;
      while (!(back = await limiter.sharedReachable()) && Date.now() < deadline + 10_000) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      assert.equal(back, true, 'shared again once the credentials match');
      assert.ok(
        logger.warns.every((w) => !w.includes("REDIS_URL's database is refused")),
        JSON.stringify(logger.warns),
      );
    } finally {
      await limiter.close();
      await secured.stop();
    }
  });

  it('a Redis that answers but takes no write (a read-only replica) keeps the fallback and is not ready', async () => {
    // Review: PING passed, so /readyz said ready and each probe ended the fallback, for the next request to fall
    // back again: a warning and an info line at every probe, for as long as the replica refused writes.
    const replica = await startOwnRedis(['--replicaof', '127.0.0.1', '1']);
    const logger = new CapturingLogger();
    const clock = new ManualClock();
    const limiter = await createRateLimiter({
      redisUrl: replica.url,
      logger,
      clock,
      keyPrefix: freshPrefix(),
    });
    try {
      const ip = '203.0.113.62';
      assert.equal((await limiter.check(ip)).allowed, true, 'decided from memory: the script may not write');
      assert.equal(limiter.fallbackActive, true);
      for (let probe = 0; probe < 3; probe++) {
        assert.equal(await limiter.sharedReachable(), false, 'not ready: it takes no write');
        assert.equal(limiter.fallbackActive, true, 'and the probe does not end the fallback');
        clock.advance(1_000); // past the back-off: the next request asks Redis again
        assert.equal((await limiter.check(ip)).allowed, true);
      }
      assert.equal(logger.warns.length, 1, 'the fallback logged once');
      assert.deepEqual(logger.infos, []);
      await replica.command('replicaof', 'no', 'one'); // promoted: it takes writes
      assert.equal(await limiter.sharedReachable(), true);
      assert.equal(limiter.fallbackActive, false, 'the shared limit applies again');
      assert.deepEqual(logger.infos, ['rate limit: Redis is back, the shared limit applies again']);
    } finally {
      await limiter.close();
      await replica.stop();
    }
  });

  it('a Redis user that may not run scripts is not ready either; one limited to the prefix is', async () => {
    // Review: the write probe was a plain SET, which a user without EVAL may make (/readyz ready, the limiter in
    // fallback), and which one allowed only the limiter's keys (`<prefix>{*`) may not (/readyz degraded for good).
    const own = await startOwnRedis();
    const prefix = 'rl:';
    await own.command('acl', 'setuser', 'noscripts', 'on', '>pw', '~*', '&*', '+@all', '-eval', '-evalsha');
    await own.command('acl', 'setuser', 'prefixed', 'on', '>pw', `~${prefix}{*`, `&${prefix}*`, '+@all');
    const as = (user: string) => own.url.replace('redis://', `redis://${user}:pw@`);
    const noScripts = await createRateLimiter({
      redisUrl: as('noscripts'),
      clock: new ManualClock(),
      keyPrefix: prefix,
    });
    const prefixed = await createRateLimiter({
      redisUrl: as('prefixed'),
      clock: new ManualClock(),
      keyPrefix: prefix,
    });
    try {
      await noScripts.check('203.0.113.63');
      assert.equal(noScripts.fallbackActive, true, 'its requests decided from memory');
      assert.equal(await noScripts.sharedReachable(), false);
      assert.equal(noScripts.fallbackActive, true);
      await prefixed.check('203.0.113.64');
      assert.equal(prefixed.fallbackActive, false, 'its requests decided in Redis');
      assert.equal(await prefixed.sharedReachable(), true);
    } finally {
      await noScripts.close();
      await prefixed.close();
      await own.stop();
    }
  });

  it('an unblock is not lost: not by an instance that was disconnected, nor to a refusal under way', async () => {
    const policy = { limit: 5 };
    const prefix = freshPrefix();
    const ip = '203.0.113.61';
    const a = new RateLimiterService({
      shared: new RedisRateLimitStore({ client: client(), keyPrefix: prefix, policy }),
      sweepIntervalMs: false,
    });
    // Instance B's commands go through a relay that can cut them or hold their replies; its subscriber is
    // direct, so that an unblock can reach it while a reply is held.
    const relay = await startReplyHoldingRelay(REDIS_URL!);
    const bClient = new Redis(
      relay.url,
      rateLimitRedisOptions({ retryStrategy: () => 20, commandTimeout: 10_000 }),
    );
    bClient.duplicate = (options) => new Redis(REDIS_URL!, { ...rateLimitRedisOptions(), ...options });
    const bStore = new RedisRateLimitStore({ client: bClient, keyPrefix: prefix, policy });
    let heard = 0;
    const subscribe = bStore.subscribeUnblocks.bind(bStore);
    bStore.subscribeUnblocks = (onUnblock, onResubscribed) =>
      subscribe((unblocked) => {
        heard++;
        onUnblock(unblocked);
      }, onResubscribed);
    const b = new RateLimiterService({ shared: bStore, sweepIntervalMs: false });
    const monitor = await monitorScripts(prefix);
    try {
      await bClient.connect();
      await Promise.all([a.unblockSubscription, b.unblockSubscription]);

      // 1. B blocks the IP (and caches the block), loses Redis, and misses A's unblock meanwhile.
      assert.equal(accepted(await hit(b, ip, 6)), 5);
      assert.equal(b.cachedBlocks, 1);
      const closed = once(bClient, 'close');
      relay.cut();
      await closed;
      await a.unblock(ip);
      const ready = once(bClient, 'ready');
      relay.resume();
      await ready;
      assert.equal((await b.check(ip)).allowed, true, 'the cached block was dropped on reconnecting');

      // 2. A refusal Redis gave B before A lifted the block is answered, but not cached after the unblock.
      assert.equal(accepted(await hit(a, ip, 6)), 4, 'blocked again (by A, so B has nothing cached)');
      const before = await monitor.seen();
      relay.hold();
      const underWay = b.check(ip);
      // Redis has run B's script (its reply is held) before A lifts the block.
      const deadline = Date.now() + 5_000;
      while ((await monitor.seen()).calls === before.calls) {
        if (Date.now() > deadline) throw new Error("timed out waiting for B's script to reach Redis");
      }
      const heardBefore = heard;
      await a.unblock(ip);
      await until(() => heard > heardBefore, "B to hear A's unblock");
      relay.release();
      assert.equal((await underWay).allowed, false, 'Redis refused it before the unblock');
      assert.equal(b.cachedBlocks, 0, 'and that refusal is not cached past the unblock');
      assert.equal((await b.check(ip)).allowed, true);
    } finally {
      relay.release();
      monitor.close();
      await a.close();
      await b.close();
      bClient.disconnect();
      await relay.close();
    }
  });

  it('a block decided from memory during an outage holds to its end when Redis comes back', async () => {
    // Redis never heard of it: the reconnect dropped every cached block, this one too, and the IP was served
    // at once, long before the Retry-After it had been given.
    const relay = await startTcpProxy(REDIS_URL!);
    const clock = new ManualClock();
    const limiter = await createRateLimiter({
      redisUrl: relay.url,
      keyPrefix: freshPrefix(),
      clock,
      policy: { limit: 5, windowMs: 3_000, blockMs: 4_000 },
      redisOptions: { retryStrategy: () => 20, commandTimeout: 10_000 },
    });
    const client = limiter.shared!.client;
    const ip = '203.0.113.56';
    try {
      assert.equal(accepted(await hit(limiter, ip, 1)), 1, 'counted in Redis');
      const closed = once(client, 'close');
      await relay.down();
      await closed;
      // Memory counts from nothing: five accepted, the sixth starts a block of 4 s.
      const during = [];
      for (let i = 0; i < 6; i++) during.push(await limiter.check(ip));
      assert.equal(accepted(during), 5);
      assert.equal(during[5]!.retryAfterMs, 4_000);

      assert.equal(limiter.fallbackActive, true);
      const ready = once(client, 'ready');
      await relay.up();
      await ready;
      // Back on the shared limit as soon as Redis is, before any request meets it (metrics, /readyz agree).
      assert.equal(limiter.fallbackActive, false);
      clock.advance(1_000);
      const after = await limiter.check(ip);
      assert.equal(after.allowed, false, 'still blocked after Redis is back');
      assert.equal(after.retryAfterMs, 3_000);
      // The operator's view says so too: Redis knows nothing of this block, this instance is refusing.
      const view = await limiter.inspect(ip);
      assert.equal(view.blocked, true);
      assert.equal(view.retry_after_seconds, 3);
      assert.equal(view.blocked_until, clock.now() + 3_000);
      clock.advance(3_000);
      assert.equal((await limiter.check(ip)).allowed, true, 'lifted at its end, and decided by Redis again');
    } finally {
      await limiter.close();
      await relay.close();
    }
  });

  it('survives Redis going away mid-run and resumes the shared limit when it is back', async () => {
    // A TCP pass-through in front of Redis: "Redis stopped mid-run" without touching the shared server.
    const relay = await startTcpProxy(REDIS_URL!);
    const prefix = freshPrefix();
    const logger = new CapturingLogger();
    const registry = new Registry();
    const limiter = await createRateLimiter({
      redisUrl: relay.url,
      logger,
      keyPrefix: prefix,
      // Quick reconnects; a long command timeout so that only the cut, not a stalled test process, falls back.
      redisOptions: { retryStrategy: () => 20, commandTimeout: 10_000 },
    });
    registerRateLimitMetrics(registry, limiter);
    const connection = limiter.shared!.client;
    const ip = '203.0.113.54';
    const log = `${prefix}{${ip}}:log`;
    try {
      assert.equal(accepted(await hit(limiter, ip, 3)), 3);
      assert.equal(await client().llen(log), 3, 'counted in Redis');

      const clockOffset = () => (limiter.shared as unknown as { redisClockOffset?: number }).redisClockOffset;
      assert.equal(typeof clockOffset(), 'number', "Redis's clock, read as it connected");
      const closed = once(connection, 'close');
      await relay.down();
      await closed;
      // The Redis it reconnects to may be another (a failover), keeping another time: read again at the connection.
      assert.equal(clockOffset(), undefined);
      // Before any request meets the outage, as /readyz shows it, and said in the log and the count (probe: an idle
      // instance never logged it).
      assert.match(await registry.metrics(), /^svc_rate_limit_fallback_active 1$/m, 'idle, Redis down');
      assert.equal(logger.warns.length, 1, 'the outage is logged with no request');
      assert.match(await registry.metrics(), /^svc_rate_limit_fallbacks_total 1$/m);
      // Its reconnect attempts are no requests Redis failed to decide (review: each counted as a store error).
      // (`once` of node:events would reject at the attempt's 'error'.)
      const attemptFails = () => new Promise((resolve) => connection.once('close', resolve));
      await attemptFails();
      await attemptFails();
      assert.match(await registry.metrics(), /^svc_rate_limit_store_errors_total 0$/m);
      assert.equal(logger.warns.length, 1, 'logged once');
      assert.equal(accepted(await hit(limiter, ip, 10)), 10, 'served, from memory');
      assert.equal(limiter.fallbackActive, true);
      assert.match(await registry.metrics(), /^svc_rate_limit_fallback_active 1$/m);
      assert.equal(logger.warns.length, 1, 'the fallback is logged once');

      const ready = once(connection, 'ready');
      await relay.up(); // same port: ioredis reconnects by itself
      await ready;
      await until(() => clockOffset() !== undefined, "Redis's clock read again");
      // The first request asks Redis (those arriving meanwhile are decided from memory); once it answers,
      // the shared limit is back for all.
      assert.equal(accepted(await hit(limiter, ip, 1)), 1);
      assert.equal(limiter.fallbackActive, false, 'the shared store is back');
      assert.equal(accepted(await hit(limiter, ip, 4)), 4);
      assert.equal(await client().llen(log), 8, 'new requests are counted in Redis again');
      assert.equal(logger.warns.length, 1);
      assert.deepEqual(logger.infos, ['rate limit: Redis is back, the shared limit applies again']);
      assert.match(await registry.metrics(), /^svc_rate_limit_fallback_active 0$/m);
    } finally {
      await limiter.close();
      await relay.close();
    }
  });
});
