/**
 * A delivery lane is one platform's stream of notifications for one resource key (wire-contract §5
 * "Order": per platform and resource). Each lane has at most one waiting graphile-worker job, found by
 * its job key; the job works the lane oldest-first while it holds the lane's lease.
 */

/** graphile-worker task that works one lane. */
export const DELIVER_LANE_TASK = 'webhooks.deliver_lane';

/** Job keys of lane jobs start with this; the sweeper's SQL rebuilds keys from it (one definition). */
export const LANE_JOB_KEY_PREFIX = 'webhooks:lane:';

export interface Lane {
  platformCode: string;
  resourceKey: string;
}

/** `webhooks:lane:<platform>:<resource key>`; the platform code has no `:`, so the key is unambiguous. */
export function laneJobKey(lane: Lane): string {
  return `${LANE_JOB_KEY_PREFIX}${lane.platformCode}:${lane.resourceKey}`;
}

/** The job payload as the database functions build it (`json_build_object('platform_code', …)`). */
export interface LaneJobPayload {
  platform_code: string;
  resource_key: string;
}

/** Validates a lane job's payload when the job starts (STYLE: payloads are validated at job start). */
export function parseLanePayload(payload: unknown): Lane {
  const p = payload as Partial<LaneJobPayload> | null;
  if (
    !p ||
    typeof p !== 'object' ||
    typeof p.platform_code !== 'string' ||
    !/^[A-Z0-9]{6}$/.test(p.platform_code) ||
    typeof p.resource_key !== 'string' ||
    p.resource_key.length === 0
  ) {
    throw new Error(`${DELIVER_LANE_TASK}: invalid payload ${JSON.stringify(payload)}`);
  }
  return { platformCode: p.platform_code, resourceKey: p.resource_key };
}
