import { sql } from 'kysely';
import { isWebhookPayloadType, type WebhookPayloadType } from '../../contract/webhook-headers.ts';
import type { WebhookPayload } from '../../contract/webhook-payloads.ts';
import { newUuid } from '../../lib/ids.ts';
import type { Executor } from '../../store/database.ts';
import { LANES_CHANNEL } from './webhooks.repository.ts';

/**
 * The transactional outbox (wire-contract §5 "Durability"). Domain code calls `recordNotification` with the
 * transaction that makes the change, so the change and its notification commit or roll back together: a committed change is never left without its notification, whatever
 * happens to the process after the commit.
 *
 * Delivery (signing, retries, order, dead letters) is done by the dispatchers in `webhook-delivery.ts`.
 */

/** A payload type, from the one list in the wire contract (`src/contract/webhook-headers.ts`). */
export type PayloadType = WebhookPayloadType;

/** One notification; its payload is the body of its payload type (`WebhookPayloads`), checked when compiled. */
export type NotificationInput = {
  [T in PayloadType]: {
    platformCode: string;
    payloadType: T;
    /** Per-resource order key: `trade:<id>`, `account:<zrn>`, `fund:<id>`, `balance:<account_id>`, `participant:<code>`. */
    resourceKey: string;
    payload: WebhookPayload<T>;
  };
}[PayloadType];

/**
 * Records one notification in the caller's transaction and returns its id (the `x-svc-hook-notification-id`
 * of every attempt). One statement: the row, which the workers' reads find after they read the last
 * (lane-reads.repository.ts), and a NOTIFY that wakes them at commit.
 *
 * A platform without an enabled webhook for this payload type gets the row as `skipped` (with the reason),
 * visible to the operator and redeliverable once a webhook is configured; no worker is woken for it.
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
export function recordNotification(trx: Executor, input: NotificationInput): Promise<string> {
  return recordAnyNotification(trx, input);
}

/** Any notification of a payload type, whatever its payload's shape. */
export interface AnyNotificationInput {
  platformCode: string;
  payloadType: PayloadType;
  resourceKey: string;
  payload: object;
}

/**
 * `recordNotification` with any JSON object as the payload: what the outbox itself stores, for its own tests and
 * benches (which count, order and lose notifications of made-up payloads). Domain code records through
 * `recordNotification`, whose payload is checked against its type's body.
 */
export async function recordAnyNotification(trx: Executor, input: AnyNotificationInput): Promise<string> {
  // Domain code is typed, but a wrong type or an empty key would make an undeliverable row: refuse it loudly.
  if (!isWebhookPayloadType(input.payloadType)) {
    throw new TypeError(`recordNotification: unknown payload type ${JSON.stringify(input.payloadType)}`);
  }
  if (typeof input.resourceKey !== 'string' || input.resourceKey.length === 0) {
    throw new TypeError('recordNotification: resourceKey must be a non-empty string');
  }
  const notificationId = newUuid();
  await sql`
    with endpoint as (
      select e.enabled, e.payload_types from webhook_endpoints e where e.platform_code = ${input.platformCode}
    ), inserted as (
      -- created_at when it is recorded, not the column's default now() (the transaction's start): the latency and
      -- oldest-pending metrics count from it, and redeliver-since reads it, as "since the commit" (review).
      insert into webhook_notifications
        (notification_id, platform_code, payload_type, resource_key, payload, status, status_reason, skipped_at,
         created_at)
      select ${notificationId}::uuid, ${input.platformCode}, ${input.payloadType}, ${input.resourceKey},
        ${JSON.stringify(input.payload)}::jsonb,
        case when skip.reason is null then 'pending' else 'skipped' end,
        skip.reason,
        case when skip.reason is null then null else now() end,
        clock_timestamp()
      from (select 1) one
      left join endpoint e on true
      cross join lateral (
        select webhook_skip_reason(e.enabled, e.payload_types, ${input.payloadType}) as reason
      ) skip
      returning status
    )
    select pg_notify(${LANES_CHANNEL}, '')
    from inserted
    where inserted.status = 'pending'
  `.execute(trx);
  return notificationId;
}
