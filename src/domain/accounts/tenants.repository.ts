import type { Insertable } from 'kysely';
import type { Executor, Trx } from '../../store/database.ts';
import type { TenantChangesTable } from '../../store/tables/accounts.tables.ts';

/** Plain queries for tenant changes: accepted (pending) and applied (history). */

/** Throws a unique violation when the same change for the participant is already pending. */
export async function insertTenantChange(trx: Trx, values: Insertable<TenantChangesTable>): Promise<void> {
  await trx.insertInto('tenant_changes').values(values).execute();
}

function pendingChanges(db: Executor, platformCode: string, zrn: string) {
  return db
    .selectFrom('tenant_changes')
    .selectAll()
    .where('platform_code', '=', platformCode)
    .where('zrn', '=', zrn)
    .where('applied_at', 'is', null)
    .orderBy('seq');
}

/** Pending changes of an account in acceptance order. */
export function listPendingChanges(db: Executor, platformCode: string, zrn: string) {
  return pendingChanges(db, platformCode, zrn).execute();
}

export type TenantChangeRow = Awaited<ReturnType<typeof listPendingChanges>>[number];

export function oldestPendingChange(trx: Trx, platformCode: string, zrn: string) {
  return pendingChanges(trx, platformCode, zrn).limit(1).executeTakeFirst();
}

/**
 * Accounts with a change pending since before `acceptedBefore`, the longest waiting first: through
 * tenant_changes_pending, which holds the pending changes alone.
 */
export function accountsWithChangesPendingSince(db: Executor, acceptedBefore: Date, limit: number) {
  return db
    .selectFrom('tenant_changes')
    .select(['platform_code', 'zrn'])
    .select((eb) => eb.fn.min('accepted_at').as('oldest'))
    .where('applied_at', 'is', null)
    .where('accepted_at', '<', acceptedBefore)
    .groupBy(['platform_code', 'zrn'])
    .orderBy('oldest')
    .limit(limit)
    .execute();
}

export async function markChangeApplied(trx: Trx, changeId: string, at: Date): Promise<void> {
  await trx.updateTable('tenant_changes').set({ applied_at: at }).where('change_id', '=', changeId).execute();
}

/** Settles the change without it taking effect (migration 0014). */
export async function markChangeRefused(trx: Trx, changeId: string, at: Date, reason: string): Promise<void> {
  await trx
    .updateTable('tenant_changes')
    .set({ applied_at: at, refused_reason: reason })
    .where('change_id', '=', changeId)
    .execute();
}
