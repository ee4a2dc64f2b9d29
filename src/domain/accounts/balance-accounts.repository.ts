import type { Executor } from '../../store/database.ts';
import { countOf } from '../paging.ts';

/** GET /accounts reads the ledger's balance accounts (0001 `balance_accounts`), scoped by platform in SQL. */
export interface BalanceAccountFilter {
  platformCode: string;
  accountOwner?: string;
  accountGroup?: string;
  accountLabel?: string;
  accountType?: string;
  asset?: string;
}

function filtered(db: Executor, filter: BalanceAccountFilter) {
  let query = db.selectFrom('balance_accounts').where('platform_code', '=', filter.platformCode);
  if (filter.accountOwner !== undefined) query = query.where('participant_code', '=', filter.accountOwner);
  if (filter.accountGroup !== undefined) query = query.where('account_group', '=', filter.accountGroup);
  if (filter.accountLabel !== undefined) query = query.where('account_label', '=', filter.accountLabel);
  if (filter.accountType !== undefined) query = query.where('account_type', '=', filter.accountType);
  if (filter.asset !== undefined) query = query.where('asset', '=', filter.asset);
  return query;
}

export function countBalanceAccounts(db: Executor, filter: BalanceAccountFilter): Promise<number> {
  return countOf(filtered(db, filter));
}

/** One page in a stable order (creation, then id), so that pages neither repeat nor skip rows. */
export function listBalanceAccounts(
  db: Executor,
  filter: BalanceAccountFilter,
  offset: number,
  limit: number,
) {
  return filtered(db, filter)
    .select([
      'account_id',
      'participant_code',
      'account_group',
      'account_label',
      'account_type',
      'asset',
      'balance',
      'updated_at',
    ])
    .orderBy('created_at')
    .orderBy('account_id')
    .offset(offset)
    .limit(limit)
    .execute();
}

/**
 * Of `participantCodes`, those holding a non-zero balance under `label` on the platform: funds of their own
 * under that label, which requests naming them with it would no longer reach once they act for someone
 * else's account (a tenant).
 */
export async function withBalancesUnder(
  db: Executor,
  platformCode: string,
  participantCodes: string[],
  label: string,
): Promise<string[]> {
  if (participantCodes.length === 0) return [];
  const rows = await db
    .selectFrom('balance_accounts')
    .select('participant_code')
    .distinct()
    .where('platform_code', '=', platformCode)
    .where('participant_code', 'in', participantCodes)
    .where('account_label', '=', label)
    .where('balance', '<>', '0')
    .execute();
  return rows.map((r) => r.participant_code);
}
