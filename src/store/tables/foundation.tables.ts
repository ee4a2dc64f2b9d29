import type { ColumnType, Generated } from 'kysely';

/** numeric columns: pg returns them as strings, which is what the decimal code wants. */
export type Numeric = ColumnType<string, string, string>;
export type CreatedAt = ColumnType<Date, Date | string | undefined, never>;
export type UpdatedAt = ColumnType<Date, Date | string | undefined, Date | string>;

export interface PlatformsTable {
  platform_code: string;
  name: string;
  ip_allowlist: ColumnType<string[], string[] | undefined, string[]>;
  quote_expiry_ms: number | null;
  /** Whether its RFQs may ask for a `quote_expiry` window (migration 0040). */
  quote_expiry_requests: ColumnType<boolean, boolean | undefined, boolean>;
  deposit_fee_bps: ColumnType<string, string | undefined, string>;
  created_at: CreatedAt;
}

export interface ApiKeysTable {
  api_key: string;
  platform_code: string;
  secret_ciphertext: Buffer;
  passphrase_hash: string;
  created_at: CreatedAt;
  revoked_at: Date | null;
  /** When a request last authenticated with it, to the minute (migration 0039); null: never since. */
  last_used_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
}

export interface ParticipantsTable {
  participant_code: string;
  platform_code: string;
  kind: ColumnType<'platform' | 'customer', 'platform' | 'customer' | undefined, never>;
  email: string | null;
  first_name: string | null;
  last_name: string | null;
  status: string;
  reason_code: string | null;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

export interface CustomerAccountsTable {
  zrn: string;
  platform_code: string;
  participant_code: string;
  account_label: string;
  region: string;
  type: ColumnType<string, string | undefined, string>;
  tier: ColumnType<string | null, string | null | undefined, string | null>;
  prefunded: ColumnType<boolean, boolean | undefined, boolean>;
  status: ColumnType<string, string | undefined, string>;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

export interface BalanceAccountsTable {
  account_id: string;
  platform_code: string;
  participant_code: string;
  account_group: string;
  account_label: string;
  account_type: string;
  asset: string;
  balance: ColumnType<string, string | undefined, string>;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

export interface BalanceMovementsTable {
  movement_id: string;
  account_id: string;
  run_id: string;
  run_type: string;
  movement_type: string;
  change: Numeric;
  movement_timestamp: ColumnType<Date, Date | string | undefined, never>;
}

export interface PricesTable {
  underlying: string;
  quoted_currency: string;
  price: Numeric;
  updated_at: UpdatedAt;
}

export interface WebhookNotificationsTable {
  notification_id: string;
  seq: Generated<string>;
  platform_code: string;
  payload_type: string;
  resource_key: string;
  payload: ColumnType<unknown, string, never>;
  created_at: CreatedAt;
}

export interface FoundationTables {
  platforms: PlatformsTable;
  api_keys: ApiKeysTable;
  participants: ParticipantsTable;
  customer_accounts: CustomerAccountsTable;
  balance_accounts: BalanceAccountsTable;
  balance_movements: BalanceMovementsTable;
  prices: PricesTable;
  webhook_notifications: WebhookNotificationsTable;
}
