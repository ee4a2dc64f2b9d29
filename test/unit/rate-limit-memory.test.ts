/**
 * In-memory store specifics: idle IPs are evicted and memory stays bounded (issue 3 "Must show" 6).
 * Semantics shared with Redis are in test/integration/rate-limit-stores.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import v8 from 'node:v8';
import vm from 'node:vm';
import { ManualClock } from '../../src/lib/clock.ts';
import { MemoryRateLimitStore } from '../../src/domain/ratelimit/memory-rate-limit.store.ts';
import { RateLimiterService } from '../../src/domain/ratelimit/rate-limiter.service.ts';

// The runner does not pass --expose-gc; turning the flag on at run time and fetching `gc` from a new
// context gives the same function, so heap figures are measured after a full collection.
v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

/** Live JS heap plus ArrayBuffer backing stores (large Float64Arrays live outside the JS heap). */
function liveBytes(): number {
  gc();
  gc();
  const { heapUsed, arrayBuffers } = process.memoryUsage();
  return heapUsed + arrayBuffers;
}

const KB = 1024;

function ipOf(i: number): string {
  return `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
}

describe('memory rate-limit store: eviction and bounded memory', () => {
  it('evicts an IP once it has no accept in the window and no block, and keeps the others', () => {
    const clock = new ManualClock();
    const store = new MemoryRateLimitStore({ clock, policy: { limit: 3, windowMs: 1_000, blockMs: 5_000 } });
    store.hit('192.0.2.1'); // idle after 1 s
    for (let i = 0; i < 4; i++) store.hit('192.0.2.2'); // blocked until +5 s
    clock.advance(500);
    store.hit('192.0.2.3'); // idle after 1.5 s
    clock.advance(500);
    assert.equal(store.sweep(), 1);
    assert.equal(store.size, 2);
    clock.advance(600);
    assert.equal(store.sweep(), 1, '192.0.2.3 is idle now');
    assert.equal(store.inspect('192.0.2.2').blocked, true, 'a blocked IP is kept while the block lasts');
    clock.advance(3_400);
    assert.equal(store.sweep(), 1);
    assert.equal(store.size, 0);
  });

  it('sweeping never changes a decision', () => {
    const clock = new ManualClock();
    const a = new MemoryRateLimitStore({ clock, policy: { limit: 5, windowMs: 100, blockMs: 50 } });
    const b = new MemoryRateLimitStore({ clock, policy: { limit: 5, windowMs: 100, blockMs: 50 } });
    let seed = 7;
    const rand = (n: number) => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n;
    for (let step = 0; step < 20_000; step++) {
      clock.advance(rand(40));
      const ip = ipOf(rand(4));
      assert.equal(a.hit(ip).allowed, b.hit(ip).allowed, `step ${step}`);
      if (step % 7 === 0) b.sweep();
    }
  });

  it('holds 100,000 IPs under 20 KB each and gives the memory back after eviction', (t) => {
    const clock = new ManualClock();
    const limiter = new RateLimiterService({ clock, sweepIntervalMs: false });
    const ips = 100_000;
    const before = liveBytes();
    // 100,000 distinct IPs with 20 requests each: the common case of many light clients.
    for (let r = 0; r < 20; r++) {
      for (let i = 0; i < ips; i++) limiter.check(ipOf(i));
      clock.advance(10);
    }
    const light = liveBytes() - before;
    assert.equal(limiter.memory.size, ips);
    const perLightIp = light / ips;

    // The worst case per IP: a full ring (2,000 accepts inside the window) and a block.
    const heavyIps = 300;
    const beforeHeavy = liveBytes();
    for (let i = 0; i < heavyIps; i++) {
      const ip = `172.16.${i >> 8}.${i & 255}`;
      for (let n = 0; n < 2001; n++) limiter.check(ip);
    }
    const perHeavyIp = (liveBytes() - beforeHeavy) / heavyIps;
    assert.ok(perLightIp < 20 * KB, `light IP costs ${perLightIp.toFixed(0)} B`);
    assert.ok(perHeavyIp < 20 * KB, `full IP costs ${(perHeavyIp / KB).toFixed(1)} KB`);
    t.diagnostic(
      `memory per tracked IP: ${perLightIp.toFixed(0)} B with 20 requests, ` +
        `${(perHeavyIp / KB).toFixed(1)} KB with a full 2,000 ring`,
    );

    // Past the window and the blocks, everything is idle: a sweep returns the memory.
    const peak = liveBytes() - before;
    clock.advance(10_000);
    limiter.sweep();
    assert.equal(limiter.memory.size, 0);
    assert.equal(limiter.cachedBlocks, 0);
    const remaining = liveBytes() - before;
    assert.ok(
      remaining < peak * 0.05,
      `after eviction ${(remaining / KB).toFixed(0)} KB of ${(peak / KB).toFixed(0)} KB remain`,
    );
  });
});
