/**
 * A delivery lane is one platform's stream of notifications for one resource key (wire-contract §5
 * "Order": per platform and resource). A lane with undelivered work has a row in `webhook_lanes`
 * (migration 0008); one dispatcher at a time holds it and works it oldest-first.
 */
export interface Lane {
  platformCode: string;
  resourceKey: string;
}

/** A lane as one string, for maps and batch keys; the platform code has no `:`, so it is unambiguous. */
export function laneKey(lane: Lane): string {
  return `${lane.platformCode}:${lane.resourceKey}`;
}
