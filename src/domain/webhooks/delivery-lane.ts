/**
 * A delivery lane is one platform's stream of notifications for one resource key (wire-contract §5
 * "Order": per platform and resource). The worker that holds the lane's partition (migration 0026) keeps its
 * undelivered notifications in memory (lane-book.ts) and works it oldest-first, one slot at a time.
 */
export interface Lane {
  platformCode: string;
  resourceKey: string;
}

/** A lane as one string, for maps and batch keys; the platform code has no `:`, so it is unambiguous. */
export function laneKey(lane: Lane): string {
  return `${lane.platformCode}:${lane.resourceKey}`;
}

/** A lane handed to a slot, with its first notifications (what they are is the slot's business). */
export interface ClaimedLane {
  lane: Lane;
  heads: readonly unknown[];
}

/**
 * Which platforms a claim takes few lanes of (their receivers are slow, webhook-dispatcher.ts): at most
 * `limit` of their due lanes, oldest first.
 */
export interface ClaimCap {
  platforms: string[];
  limit: number;
}
