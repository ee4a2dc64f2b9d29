/**
 * The rate-limit semantics of spec part 8 / wire-contract §2.3, as one suite applied to both stores
 * (issue 3 "the same test suite runs against both stores"): the in-memory store, and Redis (real
 * server at REDIS_URL) with the scripts' test-only "now" taken from the same ManualClock. Each case
 * goes through RateLimiterService, the object the HTTP plugin calls.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, describe, it, type TestContext } from 'node:test';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { ManualClock } from '../../src/lib/clock.ts';
import { RateLimiterService } from '../../src/domain/ratelimit/rate-limiter.service.ts';
import {
  RedisRateLimitStore,
  rateLimitRedisOptions,
} from '../../src/domain/ratelimit/redis-rate-limit.store.ts';
import type { RateLimitDecision, RateLimitPolicy } from '../../src/domain/ratelimit/rate-limiter.ts';
import { dropKeysAndDisconnect } from '../helpers/redis-keys.ts';

const REDIS_URL = process.env.REDIS_URL;
const SKIP_REDIS = 'REDIS_URL not set: Redis-backed rate limiter not tested';

interface Harness {
  limiter: RateLimiterService;
  clock: ManualClock;
}

/** Builds a limiter on a fresh ManualClock; returns undefined when the store is unavailable. */
type MakeHarness = (policy?: Partial<RateLimitPolicy>) => Harness;

const memoryHarness: MakeHarness = (policy) => {
  const clock = new ManualClock();
  return { clock, limiter: new RateLimiterService({ policy, clock, sweepIntervalMs: false }) };
};

let redis: Redis | undefined;
const runPrefix = `test:rl:${process.pid}:${randomUUID()}:`;

const redisHarness: MakeHarness = (policy) => {
  // A long command timeout: a test process stalled on a busy machine must not turn into a fallback.
  redis ??= new Redis(
    REDIS_URL!,
    rateLimitRedisOptions({ lazyConnect: false, enableOfflineQueue: true, commandTimeout: 10_000 }),
  );
  const clock = new ManualClock();
  // A prefix per harness: cases are independent and parallel runs never share keys.
  const shared = new RedisRateLimitStore({
    client: redis,
    policy,
    keyPrefix: `${runPrefix}${randomUUID()}:`,
    testClock: clock,
  });
  return { clock, limiter: new RateLimiterService({ shared, clock, sweepIntervalMs: false }) };
};

after(async () => {
  if (!redis) return;
  await dropKeysAndDisconnect(redis, `${runPrefix}*`);
});

/** Sends `n` requests from `ip` at the clock's current time; Redis keeps their order. */
async function hit(limiter: RateLimiterService, ip: string, n: number): Promise<RateLimitDecision[]> {
  return Promise.all(Array.from({ length: n }, () => limiter.check(ip)));
}

function accepted(decisions: RateLimitDecision[]): number {
  return decisions.filter((d) => d.allowed).length;
}

/** The suite: every case of issue 3 "Must show" 2, plus the operator view. */
function defineRateLimitCases(storeName: string, make: MakeHarness, skipReason?: string): void {
  describe(`rate limit semantics, ${storeName} store`, () => {
    const setup = (t: TestContext, policy?: Partial<RateLimitPolicy>): Harness | undefined => {
      if (skipReason) {
        t.skip(skipReason);
        return undefined;
      }
      const harness = make(policy);
      t.after(() => {
        // Every decision came from the store under test, none from the in-memory fallback.
        assert.equal(harness.limiter.stats.sharedErrors, 0);
        return harness.limiter.close();
      });
      return harness;
    };

    it('spec example: 1,000 + 1,001 requests within 5 s → refused for 10 s, served again 11 s later', async (t) => {
      const h = setup(t);
      if (!h) return;
      const { limiter, clock } = h;
      const ip = '203.0.113.7';
      const results: RateLimitDecision[] = [];
      // 1,000 requests "to one endpoint" over the first 2 s, 1,001 "to another" over the next 3 s:
      // the limit is per IP across endpoints, so the limiter sees one stream.
      for (let i = 0; i < 1000; i++) {
        results.push(...(await hit(limiter, ip, 1)));
        clock.advance(2);
      }
      for (let batch = 0; batch < 7; batch++) {
        results.push(...(await hit(limiter, ip, 143)));
        clock.advance(400);
      }
      assert.equal(results.length, 2001);
      assert.equal(accepted(results.slice(0, 2000)), 2000);
      const breach = results[2000]!;
      assert.equal(breach.allowed, false);
      assert.equal(breach.blockStarted, true);
      assert.equal(breach.retryAfterMs, 10_000);
      const blockStart = clock.now() - 400;

      clock.set(blockStart + 5_000);
      const during = await hit(limiter, ip, 50);
      assert.equal(accepted(during), 0, 'refused during the block');
      assert.equal(during[0]!.retryAfterMs, 5_000);
      clock.set(blockStart + 9_999);
      assert.equal((await limiter.check(ip)).allowed, false, 'still refused just before 10 s');
      clock.set(blockStart + 11_000);
      const later = await hit(limiter, ip, 10);
      assert.equal(accepted(later), 10, 'served again 11 s later');
    });

    it('accepts exactly 2,000 in a window, refuses the 2,001st and blocks for 10 s', async (t) => {
      const h = setup(t);
      if (!h) return;
      const ip = '198.51.100.1';
      const first = await hit(h.limiter, ip, 2000);
      assert.equal(accepted(first), 2000);
      const [breach] = await hit(h.limiter, ip, 1);
      assert.deepEqual(breach, { allowed: false, retryAfterMs: 10_000, blockStarted: true });
      h.clock.advance(10_000);
      assert.equal(accepted(await hit(h.limiter, ip, 2000)), 2000, 'after the block the IP starts afresh');
      assert.equal(accepted(await hit(h.limiter, ip, 1)), 0);
    });

    it('is a rolling window, not fixed buckets', async (t) => {
      const h = setup(t);
      if (!h) return;
      const { limiter, clock } = h;
      const ip = '198.51.100.2';
      const t0 = clock.now();
      assert.equal(accepted(await hit(limiter, ip, 1500)), 1500);
      clock.set(t0 + 9_000);
      assert.equal(accepted(await hit(limiter, ip, 500)), 500);
      // A fixed 10 s bucket starting at t0 would still be full at 9.999 s.
      clock.set(t0 + 9_999);
      assert.equal((await limiter.check(ip)).allowed, false, 'the 2,001st within 10 s is refused');
      // A fresh IP shows the same thing from the other side: at 10.5 s the first 1,500 have left.
      const ip2 = '198.51.100.3';
      clock.set(t0);
      assert.equal(accepted(await hit(limiter, ip2, 1500)), 1500);
      clock.set(t0 + 9_000);
      assert.equal(accepted(await hit(limiter, ip2, 500)), 500);
      clock.set(t0 + 10_500);
      assert.equal(accepted(await hit(limiter, ip2, 1500)), 1500, 'the first 1,500 have left the window');
      const [oneMore] = await hit(limiter, ip2, 1);
      assert.equal(oneMore!.allowed, false, 'the 500 of t=9 s are still inside: one more is refused');
      assert.equal(oneMore!.blockStarted, true);
    });

    it('treats the window boundary strictly: an accept exactly 10 s old no longer counts', async (t) => {
      const h = setup(t);
      if (!h) return;
      const ip = '198.51.100.4';
      assert.equal(accepted(await hit(h.limiter, ip, 2000)), 2000);
      h.clock.advance(9_999);
      assert.equal((await h.limiter.check(ip)).allowed, false);
      const h2 = setup(t)!;
      assert.equal(accepted(await hit(h2.limiter, ip, 2000)), 2000);
      h2.clock.advance(10_000);
      assert.equal(accepted(await hit(h2.limiter, ip, 2000)), 2000);
    });

    it('does not count refused requests: a flood during the block neither extends it nor counts after', async (t) => {
      const h = setup(t);
      if (!h) return;
      const { limiter, clock } = h;
      const ip = '198.51.100.5';
      await hit(limiter, ip, 2001);
      const blockStart = clock.now();
      for (let s = 1; s < 10; s++) {
        clock.set(blockStart + s * 1000);
        assert.equal(accepted(await hit(limiter, ip, 500)), 0);
      }
      clock.set(blockStart + 10_000);
      assert.equal(
        accepted(await hit(limiter, ip, 2000)),
        2000,
        'the 4,500 refused requests were not counted',
      );
      assert.equal(accepted(await hit(limiter, ip, 1)), 0);
    });

    it('keeps IPs independent', async (t) => {
      const h = setup(t);
      if (!h) return;
      const a = '192.0.2.10';
      const b = '2001:db8::10';
      assert.equal(accepted(await hit(h.limiter, a, 2001)), 2000);
      assert.equal(accepted(await hit(h.limiter, a, 5)), 0);
      assert.equal(accepted(await hit(h.limiter, b, 2000)), 2000, 'a blocked neighbour does not affect b');
      assert.equal(accepted(await hit(h.limiter, b, 1)), 0);
    });

    it('shows count and block state to the operator, and unblock lifts the block', async (t) => {
      const h = setup(t);
      if (!h) return;
      const { limiter, clock } = h;
      const ip = '192.0.2.20';
      assert.deepEqual(await limiter.inspect(ip), {
        ip,
        count: 0,
        limit: 2000,
        window_ms: 10_000,
        blocked: false,
        blocked_until: null,
        retry_after_seconds: 0,
      });
      await hit(limiter, ip, 700);
      clock.advance(6_000);
      await hit(limiter, ip, 300);
      assert.equal((await limiter.inspect(ip)).count, 1000);
      clock.advance(4_000);
      assert.equal((await limiter.inspect(ip)).count, 300, 'only accepts inside the window are counted');

      await hit(limiter, ip, 1701);
      const blockStart = clock.now();
      clock.advance(2_500);
      assert.deepEqual(await limiter.inspect(ip), {
        ip,
        count: 2000,
        limit: 2000,
        window_ms: 10_000,
        blocked: true,
        blocked_until: blockStart + 10_000,
        retry_after_seconds: 8,
      });
      await limiter.unblock(ip);
      assert.equal((await limiter.inspect(ip)).blocked, false);
      assert.equal((await limiter.inspect(ip)).count, 0);
      assert.equal(accepted(await hit(limiter, ip, 2000)), 2000, 'unblocked: starts afresh');
    });

    it('honours a configured limit, window and block', async (t) => {
      const h = setup(t, { limit: 3, windowMs: 1_000, blockMs: 5_000 });
      if (!h) return;
      const ip = '192.0.2.30';
      assert.deepEqual(
        (await hit(h.limiter, ip, 4)).map((d) => d.allowed),
        [true, true, true, false],
      );
      assert.equal((await h.limiter.check(ip)).retryAfterMs, 5_000);
      h.clock.advance(4_999);
      assert.equal((await h.limiter.check(ip)).allowed, false);
      h.clock.advance(1);
      assert.equal(accepted(await hit(h.limiter, ip, 4)), 3);
    });

    it('keeps an IPv6 network as one key (SVC_RATE_LIMIT_IPV6_PREFIX=64), blocked and lifted as one', async (t) => {
      const h = setup(t, { limit: 3, ipv6PrefixLength: 64 });
      if (!h) return;
      const addresses = ['2001:db8:7:7::1', '2001:db8:7:7::2', '2001:db8:7:7:ffff::3', '2001:db8:7:7::4'];
      const decisions = [];
      for (const address of addresses) decisions.push((await h.limiter.check(address)).allowed);
      assert.deepEqual(decisions, [true, true, true, false]);
      assert.equal((await h.limiter.check('2001:db8:7:8::1')).allowed, true, 'the next /64');
      const state = await h.limiter.inspect('2001:db8:7:7::99');
      assert.deepEqual([state.ip, state.count, state.blocked], ['2001:db8:7:7::/64', 3, true]);
      assert.equal((await h.limiter.unblock('2001:db8:7:7::/64')).blocked, false);
      assert.equal((await h.limiter.check('2001:db8:7:7::5')).allowed, true);
    });

    it('clears the log when a block ends, even a block shorter than the window', async (t) => {
      const h = setup(t, { limit: 3, windowMs: 1_000, blockMs: 200 });
      if (!h) return;
      const ip = '192.0.2.31';
      assert.equal(accepted(await hit(h.limiter, ip, 4)), 3);
      h.clock.advance(200);
      // The 3 accepts are 200 ms old, inside the window: only a cleared log lets these through.
      assert.equal(accepted(await hit(h.limiter, ip, 4)), 3);
    });

    it('agrees with a naive model of the rule on random traffic', async (t) => {
      // Only for the skip: each run below has a limiter of its own.
      if (!setup(t)) return;
      const policy = { limit: 4, windowMs: 100, blockMs: 60 };
      // Steps of (advance ms, requests at that time), compared with a direct reading of §2.3.
      const steps = fc.array(fc.tuple(fc.integer({ min: 0, max: 70 }), fc.integer({ min: 0, max: 6 })), {
        maxLength: 40,
      });
      await fc.assert(
        fc.asyncProperty(steps, async (trace) => {
          const { limiter, clock } = make(policy);
          const model = new NaiveModel(policy);
          const ip = '10.1.2.3';
          for (const [advance, n] of trace) {
            clock.advance(advance);
            for (let i = 0; i < n; i++) {
              const got = await limiter.check(ip);
              assert.equal(got.allowed, model.hit(clock.now()), `at +${clock.now() - 1_700_000_000_000} ms`);
            }
          }
          // Every decision came from the store under test: a broken one falls back to memory, which agrees
          // with the model too.
          assert.equal(limiter.stats.sharedErrors, 0);
          await limiter.close();
        }),
        { numRuns: storeName === 'redis' ? 40 : 300 },
      );
    });
  });
}

/** wire-contract §2.3 read literally: keeps every accept time, counts those less than windowMs old. */
class NaiveModel {
  private accepts: number[] = [];
  private blockedUntil: number | null = null;
  constructor(private readonly policy: Omit<RateLimitPolicy, 'ipv6PrefixLength'>) {}
  hit(now: number): boolean {
    if (this.blockedUntil !== null) {
      if (now < this.blockedUntil) return false;
      this.blockedUntil = null;
      this.accepts = [];
    }
    const inWindow = this.accepts.filter((t) => now - t < this.policy.windowMs).length;
    if (inWindow >= this.policy.limit) {
      this.blockedUntil = now + this.policy.blockMs;
      return false;
    }
    this.accepts.push(now);
    return true;
  }
}

defineRateLimitCases('memory', memoryHarness);
defineRateLimitCases('redis', redisHarness, REDIS_URL ? undefined : SKIP_REDIS);
