/**
 * Account funding rows (migration 0004). Plain functions over a Db or a transaction; every query that reads a
 * platform's resources is scoped by platform_code in SQL.
 */
import { sql, type Insertable, type Selectable, type SelectQueryBuilder } from 'kysely';
import type { Database } from '../../store/schema.ts';
import type { Executor, Trx } from '../../store/database.ts';
import type {
  ClientAuthTokensTable,
  DepositAddressesTable,
  FundEventsTable,
  FundingSessionsTable,
} from '../../store/tables/funding.tables.ts';
import { countOf, rowsAndCount } from '../paging.ts';

export type FundingSessionRow = Selectable<FundingSessionsTable>;
export type FundEventRow = Selectable<FundEventsTable>;

// ---- SDK tokens and the revocation list ----

export async function insertClientToken(trx: Executor, row: Insertable<ClientAuthTokensTable>) {
  await trx.insertInto('client_auth_tokens').values(row).execute();
}

export function findClientToken(db: Executor, jti: string) {
  return db.selectFrom('client_auth_tokens').selectAll().where('jti', '=', jti).executeTakeFirst();
}

/** Idempotent: the first revocation time stays. */
export async function revokeClientToken(trx: Executor, platformCode: string, jti: string, at: Date) {
  await trx
    .updateTable('client_auth_tokens')
    .set({ revoked_at: sql<Date>`coalesce(revoked_at, ${at})` })
    .where('platform_code', '=', platformCode)
    .where('jti', '=', jti)
    .execute();
}

/** Where a purge's walk of the expired tokens is: the last token it read, in (expires_at, jti) order. */
export interface TokenPurgePlace {
  expiresAt: Date;
  jti: string;
}

/**
 * One step of the purge: reads up to `limit` tokens that expired before `before`, after `after` in (expires_at, jti)
 * order (along the expiry index), clears the token id of the funding sessions they opened, which stay, and deletes
 * those tokens, in `trx`. It waits for no row: a token or a session another transaction holds (a revocation, a
 * deposit locking the participant's sessions, latest first) is passed over and left for the next run. Waiting for a
 * deposit's session while holding others deadlocked with it (review).
 */
export async function purgeClientTokensStep(
  trx: Trx,
  before: Date,
  after: TokenPurgePlace | null,
  limit: number,
): Promise<{ read: number; deleted: number; last: TokenPurgePlace | null }> {
  const batch = await trx
    .selectFrom('client_auth_tokens')
    .select(['jti', 'expires_at'])
    .where('expires_at', '<', before)
    .$if(after !== null, (qb) =>
      qb.where(sql<boolean>`(expires_at, jti) > (${after!.expiresAt}, ${after!.jti})`),
    )
    .orderBy('expires_at')
    .orderBy('jti')
    .limit(limit)
    .forUpdate()
    .skipLocked()
    .execute();
  const lastRow = batch.at(-1);
  if (!lastRow) return { read: 0, deleted: 0, last: null };
  const jtis = batch.map((row) => row.jti);
  const free = trx
    .selectFrom('funding_sessions')
    .select('session_id')
    .where(sql<boolean>`token_jti = any (${jtis}::uuid[])`)
    .forUpdate()
    .skipLocked();
  await trx
    .updateTable('funding_sessions')
    .set({ token_jti: null })
    .where(sql<boolean>`session_id = any (array(${free}))`)
    .execute();
  // The tokens whose session was passed over are still referenced: they stay.
  const result = await trx
    .deleteFrom('client_auth_tokens as t')
    .where(sql<boolean>`t.jti = any (${jtis}::uuid[])`)
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('funding_sessions as s').select('s.session_id').whereRef('s.token_jti', '=', 't.jti'),
        ),
      ),
    )
    .executeTakeFirst();
  return {
    read: batch.length,
    deleted: Number(result.numDeletedRows),
    last: { expiresAt: lastRow.expires_at, jti: lastRow.jti },
  };
}

// ---- Funding sessions ----

export function insertSession(trx: Executor, row: Insertable<FundingSessionsTable>) {
  return trx.insertInto('funding_sessions').values(row).returningAll().executeTakeFirstOrThrow();
}

export function findSession(db: Executor, sessionId: string) {
  return db.selectFrom('funding_sessions').selectAll().where('session_id', '=', sessionId).executeTakeFirst();
}

export function lockSession(trx: Trx, sessionId: string) {
  return trx
    .selectFrom('funding_sessions')
    .selectAll()
    .where('session_id', '=', sessionId)
    .forUpdate()
    .executeTakeFirst();
}

/**
 * When the participant's latest expiry report at or after `at` was made, of a session that had not expired by `at`
 * (one a deposit arriving then would have fallen within), opened after `openedAfter` (the index
 * funding_sessions_recent bounds the look); undefined when none was. A report of a session that had ended before
 * says nothing of such a deposit (review: it moved the deposit past its quote's expiry).
 */
export async function latestExpiryReportedSince(
  trx: Trx,
  platformCode: string,
  participantCode: string,
  { at, openedAfter }: { at: Date; openedAfter: Date },
): Promise<Date | undefined> {
  const row = await sessionsOf(trx, platformCode, participantCode)
    .select((eb) => eb.fn.max('expired_at').as('reported_at'))
    .where('opened_at', '>', openedAfter)
    .where('expires_at', '>=', at)
    .where('expired_at', '>=', at)
    .executeTakeFirst();
  return row?.reported_at ?? undefined;
}

/**
 * The participant's sessions that expired before `before`, not reported expired yet, oldest expiry first, locked;
 * those whose expiry is older than `since` are left to the expiry job. (Some of them had a deposit by their expiry,
 * which are never reported: the caller tells them apart.)
 */
export function lockUnreportedExpiries(
  trx: Trx,
  platformCode: string,
  participantCode: string,
  { since, before }: { since: Date; before: Date },
) {
  return sessionsOf(trx, platformCode, participantCode)
    .selectAll()
    .where('expired_at', 'is', null)
    .where('expires_at', '<', before)
    .where('expires_at', '>', since)
    .orderBy('expires_at')
    .orderBy('seq')
    .forUpdate()
    .execute();
}

/** The participant's funding sessions (the index funding_sessions_recent leads with these two columns). */
function sessionsOf(db: Executor, platformCode: string, participantCode: string) {
  return db
    .selectFrom('funding_sessions')
    .where('platform_code', '=', platformCode)
    .where('participant_code', '=', participantCode);
}

/** The participant's sessions opened at or before `at`, newest first (the index funding_sessions_recent). */
function sessionsOpenedBy(db: Executor, platformCode: string, participantCode: string, at: Date) {
  return sessionsOf(db, platformCode, participantCode)
    .where('opened_at', '<=', at)
    .orderBy('opened_at', 'desc')
    .orderBy('seq', 'desc');
}

/** wire-contract §6: the participant's most recent session opened at or before `at`, from either entry point. */
export function findLatestSession(db: Executor, platformCode: string, participantCode: string, at: Date) {
  return sessionsOpenedBy(db, platformCode, participantCode, at).selectAll().limit(1).executeTakeFirst();
}

/**
 * The newest fund quote of the participant for this asset and label whose rate still holds at `at` (opened
 * by then, not expired then), whatever sessions were opened since: its rate is what a deposit of that asset
 * to that label's address is credited at (migration 0013), and its fee what it is charged (0037).
 */
export function findHonouredFundQuote(
  db: Executor,
  platformCode: string,
  participantCode: string,
  accountLabel: string,
  fundAsset: string,
  at: Date,
) {
  return sessionsOpenedBy(db, platformCode, participantCode, at)
    .select(['session_id', 'quoted_rate', 'quoted_fee_bps'])
    .where('account_label', '=', accountLabel)
    .where('fund_asset', '=', fundAsset)
    .where('quote_expires_at', '>=', at)
    .limit(1)
    .executeTakeFirst();
}

export async function markSessionExpired(trx: Executor, sessionId: string, at: Date) {
  await trx
    .updateTable('funding_sessions')
    .set({ expired_at: at })
    .where('session_id', '=', sessionId)
    .execute();
}

/** Whether a deposit carrying this session arrived by `until` (the session then did not expire). */
export async function sessionHasDepositBy(db: Executor, sessionId: string, until: Date): Promise<boolean> {
  const row = await db
    .selectFrom('fund_events')
    .select('fund_id')
    .where('session_id', '=', sessionId)
    .where('kind', '=', 'deposit')
    .where('deposit_timestamp', '<=', until)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

// ---- Deposit addresses ----

export function findAddressFor(
  db: Executor,
  platformCode: string,
  participantCode: string,
  accountLabel: string,
  network: string,
) {
  return db
    .selectFrom('deposit_addresses')
    .selectAll()
    .where('platform_code', '=', platformCode)
    .where('participant_code', '=', participantCode)
    .where('account_label', '=', accountLabel)
    .where('network', '=', network)
    .executeTakeFirst();
}

/** Inserts unless the address or the (participant, label, network) slot exists; the caller reads back. */
export async function insertAddressIfAbsent(trx: Executor, row: Insertable<DepositAddressesTable>) {
  await trx
    .insertInto('deposit_addresses')
    .values(row)
    .onConflict((oc) => oc.doNothing())
    .execute();
}

export async function setLastFundAsset(trx: Executor, address: string, fundAsset: string) {
  await trx
    .updateTable('deposit_addresses')
    .set({ last_fund_asset: fundAsset })
    .where('address', '=', address)
    .execute();
}

/**
 * Operator ingestion (not platform-scoped: the chain indexer knows only the address). `address` is in its
 * stored form: callers pass what `canonicalDepositAddress` makes of the caller's text.
 */
export function findAddress(db: Executor, address: string) {
  return db.selectFrom('deposit_addresses').selectAll().where('address', '=', address).executeTakeFirst();
}

// ---- Fund events ----

/**
 * Serialises fund events of one participant (first-deposit flag, duplicate transaction check) without
 * locking any row other areas use; released at the end of the transaction.
 */
export async function lockParticipantFunding(trx: Trx, participantCode: string) {
  await sql`select pg_advisory_xact_lock(hashtextextended(${'svc.funding:' + participantCode}, 0))`.execute(
    trx,
  );
}

export function findDepositByTransaction(db: Executor, depositAddress: string, transactionId: string) {
  return db
    .selectFrom('fund_events')
    .selectAll()
    .where('deposit_address', '=', depositAddress)
    .where('transaction_id', '=', transactionId)
    .executeTakeFirst();
}

export async function hasSuccessfulDeposit(
  db: Executor,
  platformCode: string,
  participantCode: string,
): Promise<boolean> {
  const row = await db
    .selectFrom('fund_events')
    .select('fund_id')
    .where('platform_code', '=', platformCode)
    .where('participant_code', '=', participantCode)
    .where('kind', '=', 'deposit')
    .where('success', '=', true)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

export function insertFundEvent(trx: Executor, row: Insertable<FundEventsTable>) {
  return trx.insertInto('fund_events').values(row).returningAll().executeTakeFirstOrThrow();
}

export interface FundEventFilters {
  participant_code?: string;
  fund_asset?: string;
  deposit_address?: string;
  fund_id?: string;
  reference_id?: string;
  deposit_intent_id?: string;
  success?: boolean;
  /** Whole epoch ms (the service makes a bound with a fraction whole, exactly). */
  deposit_timestamp_gte?: number;
  deposit_timestamp_gt?: number;
  deposit_timestamp_lt?: number;
  deposit_timestamp_lte?: number;
}

/** GET /fund/transactions: the platform's fund events, newest first, one page and the total count. */
export async function listFundEvents(
  db: Executor,
  platformCode: string,
  filters: FundEventFilters,
  page: { limit: number; offset: number },
): Promise<{ rows: FundEventRow[]; count: number }> {
  let query = db.selectFrom('fund_events').where('platform_code', '=', platformCode);
  if (filters.participant_code !== undefined)
    query = query.where('participant_code', '=', filters.participant_code);
  if (filters.fund_asset !== undefined) query = query.where('fund_asset', '=', filters.fund_asset);
  if (filters.deposit_address !== undefined)
    query = query.where('deposit_address', '=', filters.deposit_address);
  if (filters.fund_id !== undefined) query = query.where('fund_id', '=', filters.fund_id);
  if (filters.reference_id !== undefined) query = query.where('reference_id', '=', filters.reference_id);
  if (filters.deposit_intent_id !== undefined)
    query = query.where('session_id', '=', filters.deposit_intent_id);
  if (filters.success !== undefined) query = query.where('success', '=', filters.success);
  if (filters.deposit_timestamp_gte !== undefined)
    query = query.where('deposit_timestamp', '>=', new Date(filters.deposit_timestamp_gte));
  if (filters.deposit_timestamp_gt !== undefined)
    query = query.where('deposit_timestamp', '>', new Date(filters.deposit_timestamp_gt));
  if (filters.deposit_timestamp_lt !== undefined)
    query = query.where('deposit_timestamp', '<', new Date(filters.deposit_timestamp_lt));
  if (filters.deposit_timestamp_lte !== undefined)
    query = query.where('deposit_timestamp', '<=', new Date(filters.deposit_timestamp_lte));

  return newestFirstPage(query, page);
}

/** A page of fund events, newest first (by deposit time, then recording order), and how many match in all. */
function newestFirstPage(
  query: SelectQueryBuilder<Database, 'fund_events', object>,
  page: { limit: number; offset: number },
): Promise<{ rows: FundEventRow[]; count: number }> {
  return rowsAndCount(
    page.offset,
    () =>
      query
        .selectAll()
        .orderBy('deposit_timestamp', 'desc')
        .orderBy('seq', 'desc')
        .limit(page.limit)
        .offset(page.offset)
        .execute(),
    () => countOf(query),
  );
}

/**
 * `GET /admin/deposits`: every platform's fund events with one of these transaction ids, at this address, or of this
 * participant (each given narrows), newest first, one page and the total count.
 */
export async function findFundEvents(
  db: Executor,
  filters: {
    transactionIds?: string[];
    depositAddress?: string;
    participant?: { platformCode: string; participantCode: string };
  },
  page: { limit: number; offset: number },
): Promise<{ rows: FundEventRow[]; count: number }> {
  let query = db.selectFrom('fund_events');
  if (filters.transactionIds !== undefined)
    query = query.where('transaction_id', 'in', filters.transactionIds);
  if (filters.depositAddress !== undefined)
    query = query.where('deposit_address', '=', filters.depositAddress);
  if (filters.participant !== undefined)
    query = query
      .where('platform_code', '=', filters.participant.platformCode)
      .where('participant_code', '=', filters.participant.participantCode);
  return newestFirstPage(query, page);
}

// ---- Ownership (wire-contract §9: naming another platform's resource → 403) ----

export async function platformOfFundEvent(db: Executor, fundId: string) {
  const row = await db
    .selectFrom('fund_events')
    .select('platform_code')
    .where('fund_id', '=', fundId)
    .executeTakeFirst();
  return row?.platform_code;
}

export async function platformOfAddress(db: Executor, address: string) {
  const row = await db
    .selectFrom('deposit_addresses')
    .select('platform_code')
    .where('address', '=', address)
    .executeTakeFirst();
  return row?.platform_code;
}
