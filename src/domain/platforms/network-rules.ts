import { CidrSet, everyAddressIn } from '../../lib/cidr.ts';
import type { DomainDeps } from '../deps.ts';
import { listAllowlists } from './platforms.repository.ts';

/**
 * wire-contract §2.1–§2.2: the firewall (an IP on no platform's allow-list) and the per-platform allow-list.
 * Both read an in-memory snapshot of every allow-list, reloaded when any platform changes (on any instance)
 * and at least every SNAPSHOT_TTL_MS as a safety net; every second while changes may not reach this instance.
 */
interface Snapshot {
  byPlatform: Map<string, CidrSet>;
  union: CidrSet;
  /** Some platform has an empty allow-list, which in cert means "allow all". */
  anyOpen: boolean;
  loadedAt: number;
  /**
   * Decisions already taken on this snapshot ("<platform>|<ip>", "|<ip>" for the firewall): a CIDR match
   * costs a BlockList lookup that allocates, twice per request, while the source IPs of a deployment are
   * few. Dropped with the snapshot, so a changed allow-list is never answered from here.
   */
  decisions: Map<string, boolean>;
}

const SNAPSHOT_TTL_MS = 30_000;
/** The age past which a snapshot is read again while this instance may be missing changes (cache `hearing`). */
const UNHEARD_SNAPSHOT_TTL_MS = 1_000;
const MAX_REMEMBERED_DECISIONS = 10_000;

function decide(snapshot: Snapshot, key: string, compute: () => boolean): boolean {
  let allowed = snapshot.decisions.get(key);
  if (allowed === undefined) {
    allowed = compute();
    // Emptied whole when full rather than kept least recently used (lru-cache): a decision is a few CIDR matches
    // to make again, less than the bookkeeping of recency on every request.
    if (snapshot.decisions.size >= MAX_REMEMBERED_DECISIONS) snapshot.decisions.clear();
    snapshot.decisions.set(key, allowed);
  }
  return allowed;
}

/** A list without its entries that allow every IP; none at all if what is left still does, in pieces. */
function withoutAllowAll(cidrs: string[]): string[] {
  const { alone, together } = everyAddressIn(cidrs);
  return together ? [] : cidrs.filter((_, i) => !alone.includes(i));
}

export function createNetworkRules(deps: DomainDeps) {
  let snapshot: Snapshot | null = null;
  let loading: Promise<Snapshot> | null = null;
  // Bumped on every invalidation, so a load that started before a change cannot install stale data.
  let generation = 0;
  const openMeansAll = deps.config.env === 'cert';

  deps.cache.subscribe((event) => {
    if (event.type === 'platform_changed' || event.type === 'all') {
      snapshot = null;
      loading = null;
      generation++;
    }
  });

  async function current(): Promise<Snapshot> {
    const age = snapshot ? deps.clock.now() - snapshot.loadedAt : Infinity;
    if (age < (deps.cache.hearing() ? SNAPSHOT_TTL_MS : UNHEARD_SNAPSHOT_TTL_MS)) return snapshot!;
    if (!loading) {
      const started = generation;
      const load = (async () => {
        // In prod an allow-all written as ranges opens nothing, as an empty list: one stored while the
        // service ran in cert would otherwise open the firewall (the union) to every IP.
        const rows = (await listAllowlists(deps.db)).map((r) =>
          openMeansAll ? r : { ...r, ip_allowlist: withoutAllowAll(r.ip_allowlist) },
        );
        const byPlatform = new Map(rows.map((r) => [r.platform_code, new CidrSet(r.ip_allowlist)]));
        const next: Snapshot = {
          byPlatform,
          union: new CidrSet(rows.flatMap((r) => r.ip_allowlist)),
          anyOpen: openMeansAll && rows.some((r) => r.ip_allowlist.length === 0),
          loadedAt: deps.clock.now(),
          decisions: new Map(),
        };
        if (started === generation) snapshot = next;
        return next;
      })().finally(() => {
        if (loading === load) loading = null;
      });
      loading = load;
    }
    return loading;
  }

  return {
    /** False → answer the firewall's 1020. */
    async firewallAllows(ip: string): Promise<boolean> {
      const s = await current();
      return s.anyOpen || decide(s, `|${ip}`, () => s.union.has(ip));
    },
    /** False → 403: the caller's platform does not list this IP. */
    async platformAllows(platformCode: string, ip: string): Promise<boolean> {
      const s = await current();
      const set = s.byPlatform.get(platformCode);
      if (!set) return false;
      return set.size === 0 ? openMeansAll : decide(s, `${platformCode}|${ip}`, () => set.has(ip));
    },
  };
}

export type NetworkRules = ReturnType<typeof createNetworkRules>;
