import { sql } from 'kysely';
import type { Executor } from '../../store/database.ts';
import { forbidden, invalid } from '../errors.ts';

/**
 * Who a request acts for when it names a participant together with an account label (funding, quotes,
 * execution, balance listings). Issue 5 / spec 2.1: a tenant has the primary holder's permissions on the
 * account, so a tenant of the account (holder P, label L) naming itself with label L acts for P's account and
 * balances move on P; once a removal has taken effect the former tenant is refused with 403.
 *
 * A participant holds at most one membership per label on its platform (account_memberships' primary key):
 * its own account with that label, or one account with that label it is a tenant of. Tenancies that would
 * make a (participant, label) pair name two accounts are refused when they are requested (409), so the
 * answer here is never ambiguous: for example a participant that is a tenant of P1's account "joint" cannot
 * also become a tenant of P2's account "joint", nor open its own account "joint", while the first tenancy
 * (or the request for it) stands.
 */
export interface AccountHolder {
  /** The participant named in the request. */
  actingParticipantCode: string;
  /** The participant whose balances move: the primary holder when the actor is a tenant. */
  ownerParticipantCode: string;
  accountLabel: string;
  /** The customer account, when there is one. */
  zrn: string | null;
  /** How the actor relates to the account: its holder, a tenant in effect, or no customer account (self). */
  role: 'holder' | 'tenant' | 'self';
}

interface ActingRow {
  participant_code: string;
  kind: string;
  status: string;
  member_role: string | null;
  member_zrn: string | null;
  member_effective_at: Date | null;
  member_holder: string | null;
  /** The account holder's status, when the actor is a member of someone's account. */
  member_holder_status: string | null;
  own_zrn: string | null;
  removed_from: string | null;
}

/**
 * One round trip for the hot path: the participant, its membership under the label (with the account's
 * holder), its own account with that label, and the account it was last removed from under that label.
 * Every join is scoped by the platform in SQL.
 */
async function lookUp(
  db: Executor,
  platformCode: string,
  participantCode: string,
  accountLabel: string,
): Promise<ActingRow | undefined> {
  return db
    .selectFrom('participants as p')
    .leftJoin('account_memberships as m', (join) =>
      join
        .onRef('m.participant_code', '=', 'p.participant_code')
        .onRef('m.platform_code', '=', 'p.platform_code')
        .on('m.account_label', '=', accountLabel),
    )
    .leftJoin('customer_accounts as held', (join) =>
      join.onRef('held.zrn', '=', 'm.zrn').onRef('held.platform_code', '=', 'p.platform_code'),
    )
    .leftJoin('participants as holder', (join) =>
      join
        .onRef('holder.participant_code', '=', 'held.participant_code')
        .onRef('holder.platform_code', '=', 'p.platform_code'),
    )
    .leftJoin('customer_accounts as own', (join) =>
      join
        .onRef('own.participant_code', '=', 'p.participant_code')
        .onRef('own.platform_code', '=', 'p.platform_code')
        .on('own.account_label', '=', accountLabel),
    )
    .select((eb) => [
      'p.participant_code',
      'p.kind',
      'p.status',
      'm.role as member_role',
      'm.zrn as member_zrn',
      'm.effective_at as member_effective_at',
      'held.participant_code as member_holder',
      'holder.status as member_holder_status',
      'own.zrn as own_zrn',
      eb
        .selectFrom('tenant_changes as tc')
        .select('tc.zrn')
        .whereRef('tc.platform_code', '=', 'p.platform_code')
        .whereRef('tc.participant_code', '=', 'p.participant_code')
        .where('tc.account_label', '=', accountLabel)
        .where('tc.change', '=', 'remove')
        .where('tc.applied_at', 'is not', null)
        .where('tc.refused_reason', 'is', null)
        .orderBy('tc.seq', 'desc')
        .limit(1)
        .as('removed_from'),
    ])
    .where('p.platform_code', '=', platformCode)
    .where('p.participant_code', '=', participantCode)
    .executeTakeFirst();
}

function decide(row: ActingRow, accountLabel: string): AccountHolder {
  const self = row.participant_code;
  const base = { actingParticipantCode: self, accountLabel };
  if (row.member_effective_at && row.member_zrn && row.member_holder) {
    return row.member_role === 'tenant'
      ? { ...base, ownerParticipantCode: row.member_holder, zrn: row.member_zrn, role: 'tenant' }
      : { ...base, ownerParticipantCode: self, zrn: row.member_zrn, role: 'holder' };
  }
  if (row.own_zrn) return { ...base, ownerParticipantCode: self, zrn: row.own_zrn, role: 'holder' };
  // issue 5: a former tenant is refused, not quietly sent to an account of its own with that label.
  if (row.removed_from) {
    throw forbidden(
      `participant ${self} is no longer a tenant of account ${row.removed_from} (account_label ${accountLabel})`,
    );
  }
  return { ...base, ownerParticipantCode: self, zrn: null, role: 'self' };
}

/**
 * Whose account a request acts on. The named participant must be an approved customer of the calling
 * platform (400 naming `field` otherwise: wire-contract §9, a participant named in the body that is not the
 * caller's is unknown), and so must the holder of the account a tenant acts on: a tenant has the holder's
 * permissions, no more, so a locked or closed customer's account is not moved through its tenants either. A
 * former tenant with nothing else under the label gets 403.
 */
export async function resolveAccountHolder(
  db: Executor,
  platformCode: string,
  participantCode: string,
  accountLabel: string,
  field = 'participant_code',
): Promise<AccountHolder> {
  const row = await lookUp(db, platformCode, participantCode, accountLabel);
  refuseUnlessApprovedCustomer(row, participantCode, field);
  return requireApprovedHolder(decide(row, accountLabel), row.member_holder_status, field);
}

/** A tenant acts for the holder's account only while that holder is approved (400 naming `field`). */
function requireApprovedHolder(holder: AccountHolder, holderStatus: string | null, field: string) {
  if (holder.role === 'tenant' && holderStatus !== 'approved') {
    throw invalid(
      `${field}: the holder ${holder.ownerParticipantCode} of account ${holder.zrn} is not approved (status ${holderStatus})`,
    );
  }
  return holder;
}

/**
 * Whose account a deposit made at `depositedAt` funds: as {@link resolveAccountHolder} now, except for a former
 * tenant whose removal took effect after the deposit was made. The tenant sent the funds while it acted for the
 * holder's account, so that account is credited (if its holder is approved now): judged when the deposit is
 * recorded, a deposit that waited behind others of the participant while the removal was applied, or one an
 * indexer reported late, was refused as "no longer a tenant" and credited no one, though its funding reference is
 * the session's at the same `depositedAt` (wire-contract §6; probe). A deposit made after the removal goes where
 * a request would now: refused for a former tenant with nothing else under the label.
 */
export async function resolveDepositHolder(
  db: Executor,
  platformCode: string,
  participantCode: string,
  accountLabel: string,
  depositedAt: Date,
): Promise<AccountHolder> {
  const field = 'participant_code';
  const row = await lookUp(db, platformCode, participantCode, accountLabel);
  refuseUnlessApprovedCustomer(row, participantCode, field);
  // A former tenant's deposit goes by its tenancy then, whatever it has under the label now (an account of its own,
  // another tenancy: review).
  const then =
    row.removed_from !== null
      ? await tenancyAt(db, platformCode, participantCode, accountLabel, depositedAt)
      : undefined;
  if (!then) return requireApprovedHolder(decide(row, accountLabel), row.member_holder_status, field);
  const holder: AccountHolder = {
    actingParticipantCode: participantCode,
    ownerParticipantCode: then.holder,
    accountLabel,
    zrn: then.zrn,
    role: 'tenant',
  };
  return requireApprovedHolder(holder, then.holder_status, field);
}

/**
 * The account (and its holder now) the participant was a tenant of under the label at `at`: the latest of what took
 * effect by then, a tenant change (tenant_changes_history) that added it, or the creation of an account that named
 * it among its tenants. A creation writes no tenant change for the tenants it makes (only for one it refuses), so a
 * deposit a creation's tenant made before its removal was refused as "no longer a tenant", and credited no one,
 * where one of a tenant added later funded the account (probe).
 */
async function tenancyAt(
  db: Executor,
  platformCode: string,
  participantCode: string,
  accountLabel: string,
  at: Date,
) {
  // One after the other: `db` may be a transaction, whose one connection pg does not let two statements share.
  const last = await lastTenantChangeBy(db, platformCode, participantCode, accountLabel, at);
  const created = await creationTenancyBy(db, platformCode, participantCode, accountLabel, at);
  if (created && (!last || createdLater(created, last))) return created;
  return last?.change === 'add' ? last : undefined;
}

/**
 * Whether the creation's tenancy is later than the change. Told by the order the changes were accepted in (`seq`),
 * not by the times they took effect, which the clocks of the instances that applied them set (review: one 50 ms
 * behind credited every later deposit to an account the participant had left). A change of the account itself follows
 * its creation. A change of another account under the label cannot fall within the creation's tenancy: the participant
 * holds one membership per label, claimed when a request is accepted and let go when its removal is applied. So one
 * accepted before the removal that ended the tenancy (`ended_seq`) came before the creation was accepted, and one
 * accepted after it comes after the tenancy.
 */
function createdLater(
  created: { zrn: string; ended_seq: number },
  change: { zrn: string; seq: number },
): boolean {
  return change.zrn !== created.zrn && change.seq < created.ended_seq;
}

/** A change's (or a creation's) account with its holder now, as tenancyAt answers it. */
function withHolder(db: Executor, platformCode: string) {
  return db
    .selectFrom('customer_accounts as a')
    .innerJoin('participants as h', (join) =>
      join.onRef('h.participant_code', '=', 'a.participant_code').on('h.platform_code', '=', platformCode),
    )
    .where('a.platform_code', '=', platformCode);
}

/** The last tenant change of the participant under the label applied by `at` and not refused. */
function lastTenantChangeBy(
  db: Executor,
  platformCode: string,
  participantCode: string,
  accountLabel: string,
  at: Date,
) {
  return (
    withHolder(db, platformCode)
      .innerJoin('tenant_changes as tc', 'tc.zrn', 'a.zrn')
      .select(['tc.change', 'tc.zrn', 'tc.seq', 'a.participant_code as holder', 'h.status as holder_status'])
      .where('tc.platform_code', '=', platformCode)
      .where('tc.participant_code', '=', participantCode)
      .where('tc.account_label', '=', accountLabel)
      .where('tc.applied_at', '<=', at)
      .where('tc.refused_reason', 'is', null)
      // The last to take effect: the last accepted, as a participant's changes under one label take effect in the
      // order they were accepted (one membership per label, claimed at acceptance). Not the latest time, which the
      // applying instance's clock sets (review: one ahead made a change of another account outlast a later tenancy).
      .orderBy('tc.seq', 'desc')
      .limit(1)
      .executeTakeFirst()
  );
}

/**
 * The account created by `at` under the label with the participant among its tenants whose creation's tenancy ended
 * last, with the acceptance order (`ended_seq`) of the removal that ended it; unless the creation refused the
 * participant (a refused tenant's add is recorded, settled at the creation's time). Only an account the participant
 * was removed from is looked at: one it was never removed from is one it is a tenant of now, which the caller goes by
 * when no earlier tenancy is found. So the look-up goes through the participant's tenant changes
 * (tenant_changes_history) and the requests' zrn, not through every creation of the platform (review: 62 ms at
 * 300,000 of them, under the participant's funding lock).
 */
function creationTenancyBy(
  db: Executor,
  platformCode: string,
  participantCode: string,
  accountLabel: string,
  at: Date,
) {
  const ended = db
    .selectFrom('tenant_changes as removal')
    .select((eb) => ['removal.zrn', eb.fn.min('removal.seq').as('ended_seq')])
    .where('removal.platform_code', '=', platformCode)
    .where('removal.participant_code', '=', participantCode)
    .where('removal.account_label', '=', accountLabel)
    .where('removal.applied_at', 'is not', null)
    .where('removal.change', '=', 'remove')
    .where('removal.refused_reason', 'is', null)
    .groupBy('removal.zrn')
    .as('ended');
  return withHolder(db, platformCode)
    .innerJoin('customer_account_requests as r', 'r.zrn', 'a.zrn')
    .innerJoin(ended, 'ended.zrn', 'r.zrn')
    .select(['r.zrn', 'ended.ended_seq', 'a.participant_code as holder', 'h.status as holder_status'])
    .where('r.platform_code', '=', platformCode)
    .where('r.applied_at', '<=', at)
    .where(sql<boolean>`${participantCode} = any(r.tenants)`)
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('tenant_changes as refused')
            .select('refused.seq')
            .where('refused.platform_code', '=', platformCode)
            .where('refused.participant_code', '=', participantCode)
            .where('refused.account_label', '=', accountLabel)
            .whereRef('refused.zrn', '=', 'r.zrn')
            .where('refused.refused_reason', 'is not', null)
            .whereRef('refused.applied_at', '=', 'r.applied_at'),
        ),
      ),
    )
    .orderBy('ended.ended_seq', 'desc')
    .limit(1)
    .executeTakeFirst()
    .then((row) => (row ? { ...row, ended_seq: Number(row.ended_seq), change: 'add' as const } : undefined));
}

/**
 * The participant check of {@link resolveAccountHolder} alone, for a request that acts on no account (an SDK token
 * without the funding permission): an approved customer of the calling platform, 400 naming `field` otherwise.
 * Whether it is, or was, a tenant of an account, and whether that account's holder is approved, is not asked:
 * it named none (probe: a former tenant was refused a profile token with a 403 about an account).
 */
export async function requireApprovedCustomer(
  db: Executor,
  platformCode: string,
  participantCode: string,
  field = 'participant_code',
): Promise<void> {
  const row = await db
    .selectFrom('participants')
    .select(['kind', 'status'])
    .where('platform_code', '=', platformCode)
    .where('participant_code', '=', participantCode)
    .executeTakeFirst();
  refuseUnlessApprovedCustomer(row, participantCode, field);
}

/** 400 naming `field` unless `row` is an approved customer of the calling platform (looked up scoped to it). */
function refuseUnlessApprovedCustomer(
  row: { kind: string; status: string } | undefined,
  participantCode: string,
  field: string,
): asserts row {
  if (!row || row.kind !== 'customer') throw invalid(`${field}: participant ${participantCode} not found`);
  if (row.status !== 'approved')
    throw invalid(`${field}: participant ${participantCode} is not approved (status ${row.status})`);
}

/**
 * The same decision for reads that only filter (GET /accounts with account_owner and account_label): no
 * status requirement, and an unknown participant is simply nobody's account (undefined).
 */
export async function findActingAccount(
  db: Executor,
  platformCode: string,
  participantCode: string,
  accountLabel: string,
): Promise<AccountHolder | undefined> {
  const row = await lookUp(db, platformCode, participantCode, accountLabel);
  return row ? decide(row, accountLabel) : undefined;
}
