import { isIPv4, isIPv6 } from 'node:net';
import ipaddr from 'ipaddr.js';
import type { Log } from '../../lib/log.ts';

/**
 * Per-IP rate limit: types shared by the stores, the service and the HTTP plugin.
 *
 * spec part 8, wire-contract §2.3: a request is accepted only if its source IP had fewer than `limit`
 * accepted requests in the preceding `windowMs` (strictly rolling). The request that would be the
 * (limit+1)-th is refused and starts a block of `blockMs` during which every request from that IP is
 * refused and not counted; after the block the IP starts afresh.
 */

export interface RateLimitPolicy {
  /** Accepted requests allowed per IP in any rolling window. */
  readonly limit: number;
  /** Length of the rolling window, ms. */
  readonly windowMs: number;
  /** How long an IP is refused once it breaches the limit, ms. */
  readonly blockMs: number;
  /**
   * The leading bits of an IPv6 address that make one client: 128 by default, every address on its own, as the spec
   * counts (per IP address); 64 counts a host that picks its addresses in its /64 at will (SLAAC, privacy
   * addresses) as one. IPv4 is always counted per address.
   */
  readonly ipv6PrefixLength: number;
}

/** spec part 8: 2,000 requests per rolling 10 s, then refused for 10 s; same in prod and cert. */
export const DEFAULT_RATE_LIMIT_POLICY: RateLimitPolicy = Object.freeze({
  limit: 2000,
  windowMs: 10_000,
  blockMs: 10_000,
  ipv6PrefixLength: 128,
});

/**
 * The shortest IPv6 prefix counted as one client: a /32 is already a whole provider's allocation, and a shorter one
 * would give unrelated networks one budget.
 */
const MIN_IPV6_PREFIX_LENGTH = 32;

export function resolvePolicy(policy: Partial<RateLimitPolicy> = {}): RateLimitPolicy {
  const resolved: RateLimitPolicy = {
    limit: policy.limit ?? DEFAULT_RATE_LIMIT_POLICY.limit,
    windowMs: policy.windowMs ?? DEFAULT_RATE_LIMIT_POLICY.windowMs,
    blockMs: policy.blockMs ?? DEFAULT_RATE_LIMIT_POLICY.blockMs,
    ipv6PrefixLength: policy.ipv6PrefixLength ?? DEFAULT_RATE_LIMIT_POLICY.ipv6PrefixLength,
  };
  for (const [name, value] of Object.entries(resolved)) {
    if (!Number.isInteger(value) || value < 1) {
      throw new RangeError(`rate limit ${name} must be a positive integer, got ${String(value)}`);
    }
  }
  const prefix = resolved.ipv6PrefixLength;
  if (prefix < MIN_IPV6_PREFIX_LENGTH || prefix > 128)
    throw new RangeError(
      `rate limit ipv6PrefixLength must be ${MIN_IPV6_PREFIX_LENGTH}-128, got ${String(prefix)}`,
    );
  return Object.freeze(resolved);
}

export interface RateLimitDecision {
  readonly allowed: boolean;
  /** ms until the IP's block ends; 0 when allowed. Relative, so it holds across clocks (Redis TIME vs ours). */
  readonly retryAfterMs: number;
  /** true only for the refusal that started a block (the would-be (limit+1)-th request). */
  readonly blockStarted: boolean;
}

export const ACCEPTED: RateLimitDecision = Object.freeze({
  allowed: true,
  retryAfterMs: 0,
  blockStarted: false,
});

export function refused(retryAfterMs: number, blockStarted: boolean): RateLimitDecision {
  return { allowed: false, retryAfterMs, blockStarted };
}

/** wire-contract §2.3: `Retry-After` carries the whole seconds left, at least 1 while refused. */
export function retryAfterSeconds(retryAfterMs: number): number {
  return Math.max(1, Math.ceil(retryAfterMs / 1000));
}

/** Operator view of one IP (`GET /admin/rate_limits/{ip}`); snake_case as on the wire. */
export interface RateLimitState {
  ip: string;
  /** Accepted requests of this IP inside the current window. */
  count: number;
  limit: number;
  window_ms: number;
  blocked: boolean;
  /** Epoch ms at which the block ends (on the store's clock), or null when not blocked. */
  blocked_until: number | null;
  /** 0 when not blocked. */
  retry_after_seconds: number;
}

export function rateLimitState(
  ip: string,
  policy: RateLimitPolicy,
  count: number,
  blockedUntil: number | null,
  now: number,
): RateLimitState {
  const blocked = blockedUntil !== null && now < blockedUntil;
  return {
    ip,
    count,
    limit: policy.limit,
    window_ms: policy.windowMs,
    blocked,
    blocked_until: blocked ? blockedUntil : null,
    retry_after_seconds: blocked ? retryAfterSeconds(blockedUntil - now) : 0,
  };
}

/**
 * A place that keeps the per-IP logs. `hit` records an accepted request or refuses it; it may be
 * synchronous (memory) so that the hot path costs no promise.
 */
export interface RateLimitStore {
  hit(ip: string): RateLimitDecision | Promise<RateLimitDecision>;
  inspect(ip: string): RateLimitState | Promise<RateLimitState>;
  /** Lifts a block and clears the IP's log, so it starts afresh. */
  unblock(ip: string): void | Promise<void>;
}

/** What the HTTP layer and the operator API use. `decide` and `check` never fail. */
export interface RateLimiter {
  /** Calls `done` with the decision: synchronously when known locally, later when the store is asked. */
  decide(ip: string, done: (decision: RateLimitDecision) => void): void;
  /** `decide` as a value: the decision itself when known at once, else a promise of it. */
  check(ip: string): RateLimitDecision | Promise<RateLimitDecision>;
  inspect(ip: string): Promise<RateLimitState>;
  /** Lifts the block, clears the log; returns the state afterwards. */
  unblock(ip: string): Promise<RateLimitState>;
}

/**
 * The key an address is counted under, so that one client is one budget: an IPv4-mapped IPv6
 * address ("::ffff:1.2.3.4", as a dual-stack listener reports IPv4 peers) counts as its IPv4
 * address, and IPv6 is written in its canonical form (RFC 5952) whatever form the operator or a
 * proxy's X-Forwarded-For used; below `ipv6PrefixLength` bits, as its network ("2001:db8:1:2::/64").
 * IPv4 — the common case — returns at once.
 */
export function rateLimitKey(ip: string, ipv6PrefixLength = 128): string {
  if (!ip.includes(':')) return ip;
  if (ip.startsWith('::ffff:') && isIPv4(ip.slice(7))) return ip.slice(7);
  if (!isIPv6(ip)) return ip;
  // A peer with its zone ("fe80::1%eth0": link-local ones) is canonicalised without it, which a URL cannot hold,
  // and the zone (another interface may be another host) kept.
  const zoneAt = ip.indexOf('%');
  if (zoneAt !== -1) return `${rateLimitKey(ip.slice(0, zoneAt), ipv6PrefixLength)}${ip.slice(zoneAt)}`;
  const canonical = new URL(`http://[${ip}]/`).hostname.slice(1, -1); // WHATWG URL: RFC 5952 form
  const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(canonical);
  if (mapped) {
    const high = parseInt(mapped[1]!, 16);
    const low = parseInt(mapped[2]!, 16);
    return `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`;
  }
  if (ipv6PrefixLength >= 128) return canonical;
  // ipaddr.js (already the firewall's parser) matches and masks (ipv6Network); its toString is the RFC 5952 form too.
  const address = ipaddr.IPv6.parse(canonical);
  if (PER_ADDRESS_RANGES.some(([range, bits]) => address.match(range, bits))) return canonical;
  return ipv6Network(canonical, ipv6PrefixLength);
}

/** The network of the first `bits` bits of an IPv6 address (no zone), as a key: "2001:db8:1:2::/64". */
export function ipv6Network(address: string, bits: number): string {
  return `${ipaddr.IPv6.networkAddressFromCIDR(`${address}/${bits}`).toString()}/${bits}`;
}

/**
 * Ranges whose addresses are not one host's: every peer on a link shares its link-local prefix (fe80::/10); a
 * translator's prefixes hold an IPv4 client each: NAT64's well-known 64:ff9b::/96 and local-use 64:ff9b:1::/48,
 * SIIT's IPv4-translated ::ffff:0:0:0/96; ::/96 (IPv4-compatible) holds each IPv4 host, beside ::1. Counted per
 * address whatever the prefix length (review: every IPv4 client of a NAT64 shared one budget).
 */
const PER_ADDRESS_RANGES: ReadonlyArray<[ipaddr.IPv6, number]> = (
  [
    ['fe80::', 10],
    ['64:ff9b::', 96],
    ['64:ff9b:1::', 48],
    ['::ffff:0:0:0', 96],
    ['::', 96],
  ] as const
).map(([range, bits]) => [ipaddr.IPv6.parse(range), bits]);

/** The rate limiter only warns (a Redis outage) and tells (a recovery). */
export type RateLimitLogger = Pick<Log, 'warn' | 'info'>;

export const silentLogger: RateLimitLogger = { warn: () => {}, info: () => {} };
