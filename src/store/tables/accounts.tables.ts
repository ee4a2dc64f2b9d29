import type { ColumnType, Generated } from 'kysely';
import type { CreatedAt } from './foundation.tables.ts';

/** Tables of migration 0003 (issue 5): asynchronous account creation, memberships and tenant changes. */
export interface CustomerAccountRequestsTable {
  request_id: string;
  zrn: string;
  platform_code: string;
  participant_code: string;
  account_label: string;
  region: string;
  type: string;
  tier: string | null;
  prefunded: boolean;
  tenants: ColumnType<string[], string[] | undefined, string[]>;
  financial_advisors: ColumnType<string[], string[] | undefined, string[]>;
  accepted_at: ColumnType<Date, Date | string, never>;
  applied_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
}

export type MembershipRole = 'holder' | 'tenant';

export interface AccountMembershipsTable {
  platform_code: string;
  participant_code: string;
  account_label: string;
  zrn: string;
  role: MembershipRole;
  /** null while the creation or tenant add that wrote the row is pending. */
  effective_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
  created_at: CreatedAt;
}

export type TenantChangeKind = 'add' | 'remove';

export interface TenantChangesTable {
  change_id: string;
  seq: Generated<number>;
  zrn: string;
  platform_code: string;
  participant_code: string;
  account_label: string;
  change: TenantChangeKind;
  accepted_at: ColumnType<Date, Date | string, never>;
  /** When the change was settled: it took effect, or it was refused (refused_reason, migration 0014). */
  applied_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
  refused_reason: ColumnType<string | null, string | null | undefined, string | null>;
}

/** Also the column 0003 adds to customer_accounts (see foundation.tables.ts for the rest of it). */
export interface CustomerAccountsExtraColumns {
  financial_advisors: ColumnType<string[], string[] | undefined, string[]>;
}

export interface AccountsTables {
  customer_accounts: CustomerAccountsExtraColumns;
  customer_account_requests: CustomerAccountRequestsTable;
  account_memberships: AccountMembershipsTable;
  tenant_changes: TenantChangesTable;
}
