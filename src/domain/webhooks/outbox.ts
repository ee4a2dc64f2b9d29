import { newUuid } from '../../lib/ids.ts';
import type { Executor } from '../../store/database.ts';

/**
 * The transactional outbox (wire-contract §5 "Durability"). Domain code calls `recordNotification` with the
 * transaction that makes the change, so the change and its notification commit or roll back together.
 * Delivery (signing, retries, order, dead letters) is the webhooks delivery worker's job.
 */
export const PAYLOAD_TYPES = [
  'trade_status_changed',
  'account_balance.changed',
  'deposit_fund_complete',
  'customer_account_status_changed',
  'participant_status_changed',
] as const;
export type PayloadType = (typeof PAYLOAD_TYPES)[number];

export interface NotificationInput {
  platformCode: string;
  payloadType: PayloadType;
  /** Per-resource order key: `trade:<id>`, `account:<zrn>`, `fund:<id>`, `balance:<account_id>`, `participant:<code>`. */
  resourceKey: string;
  payload: object;
}

export async function recordNotification(trx: Executor, input: NotificationInput): Promise<string> {
  const notificationId = newUuid();
  await trx
    .insertInto('webhook_notifications')
    .values({
      notification_id: notificationId,
      platform_code: input.platformCode,
      payload_type: input.payloadType,
      resource_key: input.resourceKey,
      payload: JSON.stringify(input.payload),
    })
    .execute();
  return notificationId;
}
