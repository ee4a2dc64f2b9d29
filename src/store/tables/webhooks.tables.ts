import type { ColumnType } from 'kysely';
import type { CreatedAt, UpdatedAt } from './foundation.tables.ts';

/**
 * Tables of migration 0002_webhooks_delivery.sql (issue 4: webhook delivery). `webhook_notifications` is
 * created by 0001; the columns below are the delivery state 0002 adds, merged with 0001's by the
 * intersection in `src/store/schema.ts`.
 */
type Timestamp = ColumnType<Date, Date | string, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;

/** The statuses are wire values too (operator API), so their one list is in the contract. */
export { NOTIFICATION_STATUS_VALUES as NOTIFICATION_STATUSES } from '../../contract/wire-values.ts';
import type { NotificationStatus } from '../../contract/webhooks.schemas.ts';
export type { NotificationStatus };

export const ATTEMPT_OUTCOMES = ['delivered', 'failed', 'gone', 'aborted'] as const;
export type AttemptOutcome = (typeof ATTEMPT_OUTCOMES)[number];

export interface WebhookEndpointsTable {
  platform_code: string;
  url: string;
  secret_ciphertext: Buffer | null;
  /** null = every payload type. */
  payload_types: string[] | null;
  enabled: ColumnType<boolean, boolean | undefined, boolean>;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

/** The columns 0002 adds to 0001's `webhook_notifications`. */
export interface WebhookNotificationDeliveryColumns {
  status: ColumnType<NotificationStatus, NotificationStatus | undefined, NotificationStatus>;
  status_reason: ColumnType<string | null, string | null | undefined, string | null>;
  next_attempt_at: ColumnType<Date, Date | string | undefined, Date | string>;
  attempt_count: ColumnType<number, number | undefined, number>;
  round_attempts: ColumnType<number, number | undefined, number>;
  state_token: ColumnType<string, string | undefined, string>;
  last_attempt_at: NullableTimestamp;
  delivered_at: NullableTimestamp;
  dead_at: NullableTimestamp;
  /** Migration 0012: the operator's latest redelivery, null if none. */
  redelivered_at: NullableTimestamp;
  /** Migration 0016: when it was skipped (recorded so, or at its turn); null if it was not, or before 0016. */
  skipped_at: NullableTimestamp;
  // Migration 0011: the latest attempt, and the earlier ones (read through the webhook_attempts view).
  last_attempt_duration_ms: ColumnType<number | null, never, number | null>;
  last_attempt_status_code: ColumnType<number | null, never, number | null>;
  last_attempt_error: ColumnType<string | null, never, string | null>;
  last_attempt_outcome: ColumnType<AttemptOutcome | null, never, AttemptOutcome | null>;
  last_attempt_worker: ColumnType<string | null, never, string | null>;
  earlier_attempts: ColumnType<unknown, never, unknown>;
  /** Migration 0026: the lane's partition (webhook_lane_partition), generated. */
  lane_partition: ColumnType<number, never, never>;
  /** Migration 0026: the transaction that recorded it, or redelivered it last (xid8, as text). */
  txid: ColumnType<string, never, string>;
}

/** Migration 0011: a view of every attempt (the latest on the notification row, the earlier ones with it). */
export interface WebhookAttemptsTable {
  notification_id: string;
  attempt_number: number;
  started_at: Timestamp;
  duration_ms: number;
  status_code: number | null;
  error: string | null;
  outcome: AttemptOutcome;
  worker: string;
}

/** Migration 0026: which worker holds each partition of the lanes, until when. */
export interface WebhookPartitionsTable {
  lane_partition: number;
  owner: string | null;
  lease_until: NullableTimestamp;
}

export interface WebhooksTables {
  webhook_endpoints: WebhookEndpointsTable;
  webhook_notifications: WebhookNotificationDeliveryColumns;
  webhook_attempts: WebhookAttemptsTable;
  webhook_partitions: WebhookPartitionsTable;
}
