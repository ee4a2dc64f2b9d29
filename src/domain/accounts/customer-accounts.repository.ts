import type { Insertable } from 'kysely';
import type { Executor, Trx } from '../../store/database.ts';
import type {
  AccountMembershipsTable,
  CustomerAccountRequestsTable,
} from '../../store/tables/accounts.tables.ts';

/** Plain queries for customer accounts, their creation requests and memberships (issue 5). */

export function findCustomerAccount(db: Executor, zrn: string) {
  return db.selectFrom('customer_accounts').selectAll().where('zrn', '=', zrn).executeTakeFirst();
}

export type CustomerAccountRow = NonNullable<Awaited<ReturnType<typeof findCustomerAccount>>>;

/** The calling platform's account, scoped in SQL; `lock` takes the row lock that serialises tenant changes. */
export function findPlatformAccount(
  db: Executor,
  platformCode: string,
  zrn: string,
  lock = false,
): Promise<CustomerAccountRow | undefined> {
  let query = db
    .selectFrom('customer_accounts')
    .selectAll()
    .where('platform_code', '=', platformCode)
    .where('zrn', '=', zrn);
  // NO KEY UPDATE: conflicts with itself (acceptances and the job serialise per account) but not with the
  // KEY SHARE locks that foreign keys to the account take.
  if (lock) query = query.forNoKeyUpdate();
  return query.executeTakeFirst();
}

/** Whether a zrn exists on any platform: only to tell 403 (another platform's) from 404 (spec 5.4). */
export async function accountExists(db: Executor, zrn: string): Promise<boolean> {
  const row = await db
    .selectFrom('customer_accounts')
    .select('zrn')
    .where('zrn', '=', zrn)
    .executeTakeFirst();
  return row !== undefined;
}

// ---- creation requests (POST /accounts) ----

/** Inserts unless the (platform, participant, label) key is taken; undefined when it was. */
export function insertCreationRequest(trx: Trx, values: Insertable<CustomerAccountRequestsTable>) {
  return trx
    .insertInto('customer_account_requests')
    .values(values)
    .onConflict((oc) => oc.columns(['platform_code', 'participant_code', 'account_label']).doNothing())
    .returningAll()
    .executeTakeFirst();
}

export function findCreationRequest(
  db: Executor,
  platformCode: string,
  participantCode: string,
  label: string,
) {
  return db
    .selectFrom('customer_account_requests')
    .selectAll()
    .where('platform_code', '=', platformCode)
    .where('participant_code', '=', participantCode)
    .where('account_label', '=', label)
    .executeTakeFirst();
}

export function lockPendingCreationRequest(trx: Trx, platformCode: string, requestId: string) {
  return trx
    .selectFrom('customer_account_requests')
    .selectAll()
    .where('platform_code', '=', platformCode)
    .where('request_id', '=', requestId)
    .where('applied_at', 'is', null)
    .forUpdate()
    .executeTakeFirst();
}

export async function markCreationApplied(trx: Trx, requestId: string, at: Date): Promise<void> {
  await trx
    .updateTable('customer_account_requests')
    .set({ applied_at: at })
    .where('request_id', '=', requestId)
    .execute();
}

// ---- memberships: who may act for which account under which label ----

export function findMembership(db: Executor, platformCode: string, participantCode: string, label: string) {
  return db
    .selectFrom('account_memberships')
    .selectAll()
    .where('platform_code', '=', platformCode)
    .where('participant_code', '=', participantCode)
    .where('account_label', '=', label)
    .executeTakeFirst();
}

export type MembershipRow = NonNullable<Awaited<ReturnType<typeof findMembership>>>;

/** The memberships the given participants hold under a label (for one validation pass over a list). */
export function findMemberships(
  db: Executor,
  platformCode: string,
  participantCodes: string[],
  label: string,
) {
  if (participantCodes.length === 0) return Promise.resolve([] as MembershipRow[]);
  return db
    .selectFrom('account_memberships')
    .selectAll()
    .where('platform_code', '=', platformCode)
    .where('participant_code', 'in', participantCodes)
    .where('account_label', '=', label)
    .execute();
}

/** Throws a unique violation when the participant already holds a membership under that label. */
export async function insertMemberships(
  trx: Trx,
  rows: Insertable<AccountMembershipsTable>[],
): Promise<void> {
  if (rows.length === 0) return;
  await trx.insertInto('account_memberships').values(rows).execute();
}

export async function activateMembership(
  trx: Trx,
  platformCode: string,
  zrn: string,
  participantCode: string,
  at: Date,
): Promise<boolean> {
  const result = await trx
    .updateTable('account_memberships')
    .set({ effective_at: at })
    .where('platform_code', '=', platformCode)
    .where('zrn', '=', zrn)
    .where('participant_code', '=', participantCode)
    .where('effective_at', 'is', null)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** All pending memberships of an account being created (its holder and initial tenants) take effect. */
export async function activateAccountMemberships(
  trx: Trx,
  platformCode: string,
  zrn: string,
  at: Date,
): Promise<void> {
  await trx
    .updateTable('account_memberships')
    .set({ effective_at: at })
    .where('platform_code', '=', platformCode)
    .where('zrn', '=', zrn)
    .where('effective_at', 'is', null)
    .execute();
}

export async function deleteTenantMembership(
  trx: Trx,
  platformCode: string,
  zrn: string,
  participantCode: string,
): Promise<boolean> {
  const result = await trx
    .deleteFrom('account_memberships')
    .where('platform_code', '=', platformCode)
    .where('zrn', '=', zrn)
    .where('participant_code', '=', participantCode)
    .where('role', '=', 'tenant')
    .executeTakeFirst();
  return result.numDeletedRows > 0n;
}

/** The holder of each account the participant is a tenant of, in effect, by label (optionally of one label). */
export function tenanciesInEffect(
  db: Executor,
  platformCode: string,
  participantCode: string,
  accountLabel?: string,
): Promise<Array<{ account_label: string; holder: string }>> {
  return db
    .selectFrom('account_memberships as m')
    .innerJoin('customer_accounts as a', (join) =>
      join.onRef('a.zrn', '=', 'm.zrn').onRef('a.platform_code', '=', 'm.platform_code'),
    )
    .select(['m.account_label', 'a.participant_code as holder'])
    .where('m.platform_code', '=', platformCode)
    .where('m.participant_code', '=', participantCode)
    .where('m.role', '=', 'tenant')
    .where('m.effective_at', 'is not', null)
    .$if(accountLabel !== undefined, (q) => q.where('m.account_label', '=', accountLabel!))
    .execute();
}

/** The tenant set in effect, in the order the tenants joined. */
export async function listEffectiveTenants(
  db: Executor,
  platformCode: string,
  zrn: string,
): Promise<string[]> {
  const rows = await db
    .selectFrom('account_memberships')
    .select('participant_code')
    .where('platform_code', '=', platformCode)
    .where('zrn', '=', zrn)
    .where('role', '=', 'tenant')
    .where('effective_at', 'is not', null)
    .orderBy('effective_at')
    .orderBy('participant_code')
    .execute();
  return rows.map((r) => r.participant_code);
}
