import { sql } from 'kysely';
import { isWebhookPayloadType, type WebhookPayloadType } from '../../contract/webhook-headers.ts';
import { newUuid } from '../../lib/ids.ts';
import type { Executor } from '../../store/database.ts';
import { DELIVER_LANE_TASK, laneJobKey } from './delivery-lane.ts';

/**
 * The transactional outbox (wire-contract §5 "Durability"). Domain code calls `recordNotification` with the
 * transaction that makes the change, so the change, its notification and the job that will deliver it
 * commit or roll back together: a committed change is never left without its notification, whatever
 * happens to the process after the commit.
 *
 * Delivery (signing, retries, order, dead letters) is done by the lane job in `webhook-delivery.ts`.
 */

/** A payload type, from the one list in the wire contract (`src/contract/webhook-headers.ts`). */
export type PayloadType = WebhookPayloadType;

export interface NotificationInput {
  platformCode: string;
  payloadType: PayloadType;
  /** Per-resource order key: `trade:<id>`, `account:<zrn>`, `fund:<id>`, `balance:<account_id>`, `participant:<code>`. */
  resourceKey: string;
  payload: object;
}

/**
 * Records one notification in the caller's transaction and returns its id (the `x-svc-hook-notification-id`
 * of every attempt). One statement: the row, and, when the platform's webhook wants it, a wake-up of the
 * notification's lane. The wake-up is a graphile-worker job keyed by lane in `preserve_run_at` mode, so a
 * lane has at most one waiting job, and a lane that is waiting out a retry of an earlier notification is
 * not woken early (wire-contract §5 "Order": the later one may not be attempted before it anyway).
 *
 * A platform without an enabled webhook for this payload type gets the row as `skipped` (with the reason),
 * visible to the operator and redeliverable once a webhook is configured; no job is queued for it.
 *
 * @example
 * await db.transaction().execute(async (trx) => {
 *   await trx.updateTable('participants').set({ status }).where(…).execute();
 *   await recordNotification(trx, {
 *     platformCode, payloadType: 'participant_status_changed',
 *     resourceKey: `participant:${code}`, payload: { participant_code: code, participant_status: status, timestamp },
 *   });
 * });
 */
export async function recordNotification(trx: Executor, input: NotificationInput): Promise<string> {
  // Domain code is typed, but a wrong type or an empty key would make an undeliverable row: refuse it loudly.
  if (!isWebhookPayloadType(input.payloadType)) {
    throw new TypeError(`recordNotification: unknown payload type ${JSON.stringify(input.payloadType)}`);
  }
  if (typeof input.resourceKey !== 'string' || input.resourceKey.length === 0) {
    throw new TypeError('recordNotification: resourceKey must be a non-empty string');
  }
  const notificationId = newUuid();
  const lane = { platformCode: input.platformCode, resourceKey: input.resourceKey };
  await sql`
    with endpoint as (
      select e.enabled, e.payload_types from webhook_endpoints e where e.platform_code = ${input.platformCode}
    ), inserted as (
      insert into webhook_notifications
        (notification_id, platform_code, payload_type, resource_key, payload, status, status_reason)
      select ${notificationId}::uuid, ${input.platformCode}, ${input.payloadType}, ${input.resourceKey},
        ${JSON.stringify(input.payload)}::jsonb,
        case when skip.reason is null then 'pending' else 'skipped' end,
        skip.reason
      from (select 1) one
      left join endpoint e on true
      cross join lateral (
        select webhook_skip_reason(e.enabled, e.payload_types, ${input.payloadType}) as reason
      ) skip
      returning status
    )
    select graphile_worker.add_job(
      ${DELIVER_LANE_TASK}::text,
      json_build_object('platform_code', ${input.platformCode}::text, 'resource_key', ${input.resourceKey}::text),
      job_key => ${laneJobKey(lane)}::text,
      job_key_mode => 'preserve_run_at'
    )
    from inserted
    where inserted.status = 'pending'
  `.execute(trx);
  return notificationId;
}
