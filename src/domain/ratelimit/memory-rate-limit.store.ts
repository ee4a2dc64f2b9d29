import { monotonicClock, type Clock } from '../../lib/clock.ts';
import {
  ACCEPTED,
  rateLimitState,
  refused,
  resolvePolicy,
  type RateLimitDecision,
  type RateLimitPolicy,
  type RateLimitState,
  type RateLimitStore,
} from './rate-limiter.ts';

/** Most IPs send a handful of requests: start small and double up to `limit` (amortised O(1)). */
const INITIAL_CAPACITY = 8;

/**
 * The accept log of one IP: a ring of its last `limit` accept times (DESIGN §5). While fewer than
 * `limit` accepts are logged the ring has not wrapped and `head` stays 0; once full, `head` is the
 * slot of the oldest accept, which is the one the next accept overwrites.
 */
class IpLog {
  times: Float64Array = new Float64Array(INITIAL_CAPACITY);
  count = 0;
  head = 0;
  lastAccept = 0;
  /** 0 when not blocked. */
  blockedUntil = 0;

  reset(): void {
    this.times = new Float64Array(INITIAL_CAPACITY);
    this.count = 0;
    this.head = 0;
    this.blockedUntil = 0;
  }
}

export interface MemoryRateLimitStoreOptions {
  policy?: Partial<RateLimitPolicy>;
  clock?: Clock;
}

/**
 * In-process store: exact rolling window per IP, O(1) per request. Holds one instance's view only,
 * so it is the default for a single instance and the fallback when Redis is unreachable.
 * Memory: an IP costs ~0.2 KB while it has sent few requests and at most `limit` × 8 B (16 KB at
 * 2,000) plus ~0.2 KB; idle IPs are dropped by `sweep()`, which the service calls periodically.
 */
export class MemoryRateLimitStore implements RateLimitStore {
  readonly policy: RateLimitPolicy;
  private readonly clock: Clock;
  private readonly logs = new Map<string, IpLog>();

  constructor(options: MemoryRateLimitStoreOptions = {}) {
    this.policy = resolvePolicy(options.policy);
    this.clock = options.clock ?? monotonicClock;
  }

  /** Number of IPs currently tracked (for metrics and the memory test). */
  get size(): number {
    return this.logs.size;
  }

  hit(ip: string): RateLimitDecision {
    const now = this.clock.now();
    const { limit, windowMs, blockMs } = this.policy;
    let log = this.logs.get(ip);
    if (log === undefined) {
      log = new IpLog();
      this.logs.set(ip, log);
    } else if (log.blockedUntil !== 0) {
      // wire-contract §2.3: refused during the block and not counted; afterwards the IP starts afresh.
      if (now < log.blockedUntil) return refused(log.blockedUntil - now, false);
      log.reset();
    }

    if (log.count === limit) {
      // The ring holds the last `limit` accepts; if the oldest is still inside the window, this IP
      // already has `limit` accepts in the preceding windowMs and this request would be one too many.
      if (now - log.times[log.head] < windowMs) {
        log.blockedUntil = now + blockMs;
        return refused(blockMs, true);
      }
      log.times[log.head] = now;
      log.head = log.head + 1 === limit ? 0 : log.head + 1;
    } else {
      if (log.count === log.times.length) {
        const grown = new Float64Array(Math.min(limit, log.times.length * 2));
        grown.set(log.times);
        log.times = grown;
      }
      log.times[log.count++] = now;
    }
    log.lastAccept = now;
    return ACCEPTED;
  }

  inspect(ip: string): RateLimitState {
    const now = this.clock.now();
    const log = this.logs.get(ip);
    if (log === undefined) return rateLimitState(ip, this.policy, 0, null, now);
    if (log.blockedUntil !== 0 && now >= log.blockedUntil) {
      return rateLimitState(ip, this.policy, 0, null, now); // block over: the IP starts afresh
    }
    let count = 0;
    for (let i = 0; i < log.count; i++) {
      if (now - log.times[i] < this.policy.windowMs) count++;
    }
    return rateLimitState(ip, this.policy, count, log.blockedUntil || null, now);
  }

  unblock(ip: string): void {
    this.logs.delete(ip);
  }

  /**
   * Drops every IP whose state is the same as a fresh one: no accept inside the window and no block
   * in force. Returns how many were dropped. O(tracked IPs); meant to run about once per window.
   */
  sweep(): number {
    const now = this.clock.now();
    const { windowMs } = this.policy;
    let dropped = 0;
    for (const [ip, log] of this.logs) {
      const idle = log.blockedUntil !== 0 ? now >= log.blockedUntil : now - log.lastAccept >= windowMs;
      if (idle) {
        this.logs.delete(ip);
        dropped++;
      }
    }
    return dropped;
  }

  clear(): void {
    this.logs.clear();
  }
}
