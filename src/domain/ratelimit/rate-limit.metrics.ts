import { Counter, Gauge, type Registry } from 'prom-client';
import type { RateLimiterService, RateLimiterStats } from './rate-limiter.service.ts';

/**
 * Registers the limiter's metrics on `registry` (DESIGN §6: rate-limit blocks; §5: the Redis
 * fallback must be visible). Values are read from the limiter at scrape time, so the hot path only
 * bumps plain numbers.
 */
export function registerRateLimitMetrics(registry: Registry, limiter: RateLimiterService): void {
  const counter = (name: string, help: string, stat: keyof RateLimiterStats) =>
    new Counter({
      name,
      help,
      registers: [registry],
      collect() {
        this.reset();
        this.inc(limiter.stats[stat]);
      },
    });
  const gauge = (name: string, help: string, read: () => number) =>
    new Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        this.set(read());
      },
    });

  counter('svc_rate_limit_refused_total', 'Requests refused with 429 by the per-IP rate limit', 'refused');
  counter('svc_rate_limit_blocks_total', 'Per-IP blocks started (limit exceeded)', 'blocksStarted');
  counter(
    'svc_rate_limit_cached_refusals_total',
    'Refusals answered from the local blocked-until cache without asking the store',
    'cachedRefusals',
  );
  counter(
    'svc_rate_limit_fallbacks_total',
    'Times this instance fell back from Redis to the in-memory limiter',
    'fallbacks',
  );
  counter(
    'svc_rate_limit_store_errors_total',
    'Requests (and operator calls) that Redis failed to decide, decided from memory instead',
    'sharedErrors',
  );
  gauge(
    'svc_rate_limit_fallback_active',
    '1 while this instance limits from memory because Redis is unavailable',
    () => (limiter.fallbackActive ? 1 : 0),
  );
  gauge('svc_rate_limit_tracked_ips', 'IPs held by the in-memory limiter', () => limiter.memory.size);
  gauge('svc_rate_limit_cached_blocks', 'Blocked IPs cached on this instance', () => limiter.cachedBlocks);
}
