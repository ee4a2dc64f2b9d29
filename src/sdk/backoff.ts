/**
 * Backoff delays for the SDK's retries (spec 7.1 rule 4: start at 100 to 500 ms, increase
 * exponentially after each retry) and the options every retrying call takes.
 *
 * The delay before retry n (n = 1, 2, …) is drawn uniformly from a window that doubles with n:
 *
 *     window(n) = [minFirstMs · 2^(n−1), maxFirstMs · 2^(n−1)]     while maxFirstMs · 2^(n−1) ≤ capMs
 *               = [capMs · minFirstMs / maxFirstMs, capMs]          after that
 *     delay(n)  = lo + random() · (hi − lo)                          (uniform in the window)
 *
 * With the defaults (100, 500, cap 5000): [100, 500], [200, 1000], [400, 2000], [800, 4000], then
 * [1000, 5000] for every later retry. So:
 * - the first delay is uniform in [100, 500] ms (spec 7.1.4) whenever capMs ≥ 500;
 * - the window's bounds double until the upper bound would pass the cap, and the delay never
 *   exceeds capMs (the upper bound is at most capMs in both branches);
 * - the jitter is the draw itself and it keeps the same ratio after the cap (lower bound = cap / 5
 *   with the defaults), so clients that failed together do not retry in lock-step.
 * Delays are not rounded (setTimeout takes fractional ms).
 */
import { setTimeout as delay } from 'node:timers/promises';

export interface BackoffOptions {
  /** Uniform source in [0, 1); inject a seeded or fixed one in tests. Default `Math.random`. */
  random?: () => number;
  /** Upper bound of any delay, ms. Default 5000. */
  capMs?: number;
  /** Lower bound of the first delay, ms. Default 100 (spec 7.1.4). */
  minFirstMs?: number;
  /** Upper bound of the first delay, ms. Default 500 (spec 7.1.4). */
  maxFirstMs?: number;
}

export const DEFAULT_BACKOFF = Object.freeze({ capMs: 5000, minFirstMs: 100, maxFirstMs: 500 });

/** The window that {@link backoffDelay} draws from for retry `attempt` (1-based); exported so tests can state the bounds. */
export function backoffBounds(
  attempt: number,
  options: Omit<BackoffOptions, 'random'> = {},
): { minMs: number; maxMs: number } {
  const { capMs, minFirstMs, maxFirstMs } = { ...DEFAULT_BACKOFF, ...definedOnly(options) };
  if (!Number.isInteger(attempt) || attempt < 1) {
    throw new RangeError(`backoff attempt must be an integer ≥ 1, got ${attempt}`);
  }
  if (!(minFirstMs >= 0 && maxFirstMs >= minFirstMs && capMs > 0)) {
    throw new RangeError('backoff needs 0 ≤ minFirstMs ≤ maxFirstMs and capMs > 0');
  }
  // Computed without dividing by maxFirstMs below the cap, so the bounds are exact (powers of two);
  // 2 ** 1100 is Infinity, which lands in the capped branch: no overflow for large attempts.
  const doubling = 2 ** (attempt - 1);
  if (maxFirstMs * doubling <= capMs) return { minMs: minFirstMs * doubling, maxMs: maxFirstMs * doubling };
  return { minMs: (capMs * minFirstMs) / maxFirstMs, maxMs: capMs };
}

/**
 * Delay in ms before retry `attempt` (1 = the first retry). See the module comment for the bounds.
 *
 * @example
 * backoffDelay(1, { random: () => 0.5 }); // 300
 * backoffDelay(2, { random: () => 0.5 }); // 600
 * backoffDelay(9, { random: () => 1 - Number.EPSILON }); // just under 5000 (the cap)
 */
export function backoffDelay(attempt: number, options: BackoffOptions = {}): number {
  const { minMs, maxMs } = backoffBounds(attempt, options);
  const r = (options.random ?? Math.random)();
  if (!(r >= 0 && r <= 1)) throw new RangeError(`random() must return a number in [0, 1], got ${r}`);
  // min(): lo + r·(hi − lo) can round one ulp above hi; the documented bound is exact.
  return Math.min(maxMs, minMs + r * (maxMs - minMs));
}

/** Everything a retrying SDK call can be told; every field has a default ({@link resolveRetryOptions}). */
export interface RetryOptions {
  /** Retries after the first attempt, all causes together (5xx, network, 429). Default 3. */
  maxRetries?: number;
  /** Overall budget from the first send, ms: no wait is started that would end after it. Default 60 000. */
  deadlineMs?: number;
  /** Cap of one backoff delay, ms. Default 5000. (The 429 wait of spec 7 is not capped by it.) */
  capMs?: number;
  /** Uniform source in [0, 1). Default `Math.random`. */
  random?: () => number;
  /**
   * Waits `ms`; inject a fake in tests so nothing really waits. Default `timers/promises.setTimeout`, ended by
   * the call's `signal` (given as the second argument), so an aborted call leaves no timer behind.
   */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Current epoch ms, for the deadline and for a `Retry-After` given as a date. Default `Date.now`. */
  now?: () => number;
  /** spec 7.2: on execute 404 with no trade found, request a new quote and execute it. Default false. */
  allowRequote?: boolean;
  /** Bound on those re-quotes per call. Default 1. */
  maxRequotes?: number;
}

export type ResolvedRetryOptions = Readonly<Required<RetryOptions>>;

export const DEFAULT_RETRY_OPTIONS: ResolvedRetryOptions = Object.freeze({
  maxRetries: 3,
  deadlineMs: 60_000,
  capMs: DEFAULT_BACKOFF.capMs,
  random: Math.random,
  sleep: async (ms: number, signal?: AbortSignal) => {
    // An abort ends the wait; the call's own handling of it (request-sender.ts `pause`) says what it means.
    await delay(ms, undefined, { signal }).catch(() => {});
  },
  now: Date.now,
  allowRequote: false,
  maxRequotes: 1,
});

/** Fills in defaults (an explicit `undefined` means "default"), validated once at the edge. */
export function resolveRetryOptions(options: RetryOptions = {}): ResolvedRetryOptions {
  const resolved = { ...DEFAULT_RETRY_OPTIONS, ...definedOnly(options) };
  for (const key of ['maxRetries', 'maxRequotes'] as const) {
    if (!Number.isInteger(resolved[key]) || resolved[key] < 0) {
      throw new RangeError(`${key} must be an integer ≥ 0, got ${resolved[key]}`);
    }
  }
  if (!(resolved.deadlineMs >= 0)) throw new RangeError(`deadlineMs must be ≥ 0, got ${resolved.deadlineMs}`);
  if (!(resolved.capMs > 0)) throw new RangeError(`capMs must be > 0, got ${resolved.capMs}`);
  return Object.freeze(resolved);
}

function definedOnly<T extends object>(options: T): Partial<T> {
  return Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) as Partial<T>;
}
