import type { ColumnType } from 'kysely';
import type { CreatedAt } from './foundation.tables.ts';

/** Migration 0006: customers created through POST /participants/customers/new (spec 4.6, 7.3). */
export interface CustomerSubmissionsTable {
  participant_code: string;
  platform_code: string;
  /** X-REQUEST-ID as sent; null when absent. */
  request_id: string | null;
  /** Hex SHA-256 of the RFC 8785 canonical body. */
  payload_hash: string;
  /** jsonb: written as JSON text, read back as the parsed object. */
  payload: ColumnType<Record<string, unknown>, string, never>;
  /** json (not jsonb): the original 201 message, replayed as it was. */
  response: ColumnType<Record<string, unknown>, string, never>;
  created_at: CreatedAt;
}

export interface ParticipantsTables {
  customer_submissions: CustomerSubmissionsTable;
}
