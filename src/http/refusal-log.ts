import { isIPv6 } from 'node:net';
import type { Clock } from '../lib/clock.ts';
import { ipv6Network, rateLimitKey } from '../domain/ratelimit/rate-limiter.ts';

/** How long a source's refusals after its first are logged at debug. */
const QUIET_MS = 10_000;
/** Sources followed at once; beyond, a new source's refusals are at debug too (no flood of lines, no memory). */
const MAX_SOURCES = 10_000;

/**
 * Which refusals of a caller without credentials (the firewall's 403, the operator API's 401) are logged at info:
 * a source's first, then its first after each 10 s; the others at debug. Neither refusal is rate limited (the
 * firewall comes first, the operator API has no limit), so a stranger's flood made a line at info of each
 * request, tens of MB a second (log probe), as a 429 flood did before the rate limit's own quieting. An IPv6 source
 * is its /64, so that rotating addresses do not evade it.
 *
 * Our own: a sampling logger (pino has none) would quiet every source's lines together, the first of a new one too.
 */
export class RefusalLog {
  /** Source key → when its refusals are logged at info again. */
  private readonly quietUntil = new Map<string, number>();
  /** When the full map was last swept of sources whose quiet ended: at most once a second, not per request. */
  private sweptAt = -Infinity;

  constructor(private readonly clock: Clock) {}

  /** Whether this refusal of `address` (`kind`: what refused it) is to be logged at info. */
  atInfo(kind: string, address: string): boolean {
    const key = `${kind} ${sourceOf(address)}`;
    const now = this.clock.now();
    const until = this.quietUntil.get(key);
    if (until !== undefined && now < until) return false;
    if (until === undefined && this.quietUntil.size >= MAX_SOURCES) {
      if (now - this.sweptAt < 1_000) return false;
      this.sweptAt = now;
      for (const [source, ends] of this.quietUntil) if (ends <= now) this.quietUntil.delete(source);
      if (this.quietUntil.size >= MAX_SOURCES) return false;
    }
    this.quietUntil.set(key, now + QUIET_MS);
    return true;
  }
}

/**
 * The source a refusal is counted under: an IPv4 address (IPv4-mapped too), or an IPv6 one's /64 whatever its range
 * and zone, whatever the rate limit counts (review: the ranges it counts per address, fe80::/10, the translators',
 * were each address its own source here too).
 */
function sourceOf(address: string): string {
  const key = rateLimitKey(address); // canonical
  if (!key.includes(':')) return key;
  const bare = key.split('%', 1)[0]!;
  if (!isIPv6(bare)) return key; // no address (never a peer's): as it is
  return ipv6Network(bare, 64);
}
