import type { ColumnType, Generated } from 'kysely';
import type { CreatedAt, Numeric } from './foundation.tables.ts';

/** Tables of migration 0004_funding.sql (issue 6: account funding). */
type Timestamp = ColumnType<Date, Date | string, Date | string>;
type NullableNumeric = ColumnType<string | null, string | null | undefined, string | null>;

export interface ClientAuthTokensTable {
  jti: string;
  platform_code: string;
  participant_code: string;
  permissions: ColumnType<string[], string[], never>;
  issued_at: ColumnType<Date, Date | string, never>;
  expires_at: ColumnType<Date, Date | string, never>;
  revoked_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
}

export interface DepositAddressesTable {
  address: string;
  platform_code: string;
  participant_code: string;
  account_label: string;
  network: string;
  last_fund_asset: ColumnType<string | null, string | null | undefined, string | null>;
  created_at: CreatedAt;
}

export type FundingSessionSource = 'client_auth_token' | 'fund_rfq';

export interface FundingSessionsTable {
  session_id: string;
  seq: Generated<number>;
  platform_code: string;
  participant_code: string;
  account_label: string;
  source: FundingSessionSource;
  reference_id: ColumnType<string, string | undefined, never>;
  fund_asset: ColumnType<string | null, string | null | undefined, never>;
  /** Cleared, and only that, when the purge deletes the token (migration 0041). */
  token_jti: ColumnType<string | null, string | null | undefined, null>;
  opened_at: ColumnType<Date, Date | string, never>;
  expires_at: ColumnType<Date | null, Date | string | null | undefined, never>;
  expired_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  /** Fund quote sessions (migration 0013): the rate quoted, honoured for deposits made by quote_expires_at. */
  quoted_rate: ColumnType<string | null, string | null | undefined, never>;
  quote_expires_at: ColumnType<Date | null, Date | null | undefined, never>;
  /** The deposit fee a fund quote showed (migration 0037), honoured with its rate; null before then. */
  quoted_fee_bps: ColumnType<string | null, string | null | undefined, never>;
}

export type FundEventKind = 'deposit' | 'session_expired';

export interface FundEventsTable {
  fund_id: string;
  seq: Generated<number>;
  platform_code: string;
  kind: FundEventKind;
  participant_code: string;
  owner_participant_code: string | null;
  account_label: string;
  fund_asset: string;
  deposited_asset: string;
  rate: Numeric;
  quoted_currency: string;
  source_address: string;
  deposit_address: string | null;
  quantity: Numeric;
  notional: Numeric;
  success: boolean;
  /** Migration 0018: the deposit report's own `success` (null: not a deposit, or recorded before 0018). */
  reported_success: ColumnType<boolean | null, boolean | null | undefined, never>;
  status_reason: string;
  fund_timestamp: Timestamp;
  deposit_timestamp: Timestamp;
  transaction_id: string | null;
  is_first_deposit: boolean;
  raw_fee_bps: NullableNumeric;
  deposit_fee_bps: NullableNumeric;
  raw_fee_notional: NullableNumeric;
  deposit_fee_notional: NullableNumeric;
  reference_id: string;
  session_id: string | null;
  created_at: CreatedAt;
}

export interface FundingTables {
  client_auth_tokens: ClientAuthTokensTable;
  deposit_addresses: DepositAddressesTable;
  funding_sessions: FundingSessionsTable;
  fund_events: FundEventsTable;
}
