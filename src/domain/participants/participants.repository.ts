import { createHash } from 'node:crypto';
import { sql } from 'kysely';
import type { Executor, Trx } from '../../store/database.ts';
import { countOf, rowsAndCount } from '../paging.ts';

export function findParticipant(db: Executor, participantCode: string) {
  return db
    .selectFrom('participants')
    .selectAll()
    .where('participant_code', '=', participantCode)
    .executeTakeFirst();
}

/** Scoped to the calling platform in SQL (STYLE: every query is scoped by the platform). */
export function findPlatformParticipant(db: Executor, platformCode: string, participantCode: string) {
  return db
    .selectFrom('participants')
    .selectAll()
    .where('platform_code', '=', platformCode)
    .where('participant_code', '=', participantCode)
    .executeTakeFirst();
}

/**
 * An email as one identity whatever its letter case, as the indexes hold it (migration 0042): lower() of the
 * collation "C" lowers A-Z alone, whatever the database's locale (a Turkish one lowers I to ı), and so matches
 * `email.toLowerCase()` of the ASCII the `email` format admits.
 */
function emailKey(column: 'email' | 'p.email') {
  return sql<string>`lower(${sql.ref(column)} collate "C")`;
}

/** Emails are one identity whatever their case: the unique index is on (platform_code, emailKey). */
export function findPlatformParticipantByEmail(db: Executor, platformCode: string, email: string) {
  return db
    .selectFrom('participants')
    .selectAll()
    .where('platform_code', '=', platformCode)
    .where(emailKey('email'), '=', email.toLowerCase())
    .executeTakeFirst();
}

/** The participants of every platform with this email (any letter case), by platform. */
export function findParticipantsByEmail(db: Executor, email: string) {
  return db
    .selectFrom('participants')
    .selectAll()
    .where(emailKey('email'), '=', email.toLowerCase())
    .orderBy('platform_code')
    .execute();
}

/** Whether another platform has a participant with this email: only to tell 403 from 404 (wire-contract §9). */
export async function emailOnOtherPlatform(db: Executor, platformCode: string, email: string) {
  const row = await db
    .selectFrom('participants')
    .select('participant_code')
    .where(emailKey('email'), '=', email.toLowerCase())
    .where('platform_code', '<>', platformCode)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

/** Whether the participant code belongs to another platform: only to tell 403 from "none" (wire-contract §9). */
export async function codeOnOtherPlatform(db: Executor, platformCode: string, participantCode: string) {
  const row = await db
    .selectFrom('participants')
    .select('participant_code')
    .where('participant_code', '=', participantCode)
    .where('platform_code', '<>', platformCode)
    .executeTakeFirst();
  return row !== undefined;
}

// ---- customer submissions (migration 0006) ----

export function findSubmissionByRequestId(db: Executor, platformCode: string, requestId: string) {
  return db
    .selectFrom('customer_submissions')
    .selectAll()
    .where('platform_code', '=', platformCode)
    .where('request_id', '=', requestId)
    .executeTakeFirst();
}

export function findSubmissionByPayload(db: Executor, platformCode: string, payloadHash: string) {
  return db
    .selectFrom('customer_submissions')
    .selectAll()
    .where('platform_code', '=', platformCode)
    .where('payload_hash', '=', payloadHash)
    .executeTakeFirst();
}

export interface SubmissionValues {
  participant_code: string;
  platform_code: string;
  request_id: string | null;
  payload_hash: string;
  payload: object;
  response: object;
}

export async function insertSubmission(trx: Trx, values: SubmissionValues): Promise<void> {
  await trx
    .insertInto('customer_submissions')
    .values({
      ...values,
      payload: JSON.stringify(values.payload),
      response: JSON.stringify(values.response),
    })
    .execute();
}

/** Namespaces of the two-key advisory locks customer onboarding takes (apart from any other lock user). */
export const ONBOARDING_LOCK = { requestId: 0x53564301, email: 0x53564302 } as const;

/**
 * A transaction-scoped advisory lock on (namespace, 32-bit digest of platform and key). A digest collision
 * only makes two unrelated requests wait for each other; correctness rests on the unique indexes of 0006.
 */
export async function lockOnboardingKey(
  trx: Trx,
  namespace: number,
  platformCode: string,
  key: string,
): Promise<void> {
  const digest = createHash('sha256').update(`${platformCode}\n${key}`).digest().readInt32BE(0);
  await sql`select pg_advisory_xact_lock(${namespace}::int4, ${digest}::int4)`.execute(trx);
}

// ---- look-ups (GET /participants) ----

export interface ParticipantFilters {
  participantCode?: string;
  email?: string;
  status?: string;
  /** Only customers born after this day (YYYY-MM-DD), i.e. minors; needs the submitted date of birth. */
  bornAfter?: string;
  /** A filter no participant can match (e.g. an entity type other than individual). */
  matchesNothing?: boolean;
}

/** The platform's customers, oldest first, with the jurisdiction they were onboarded with. */
export async function listPlatformCustomers(
  db: Executor,
  platformCode: string,
  filters: ParticipantFilters,
  page: { limit: number; offset: number },
) {
  let query = db
    .selectFrom('participants as p')
    .leftJoin('customer_submissions as s', 's.participant_code', 'p.participant_code')
    .where('p.platform_code', '=', platformCode)
    .where('p.kind', '=', 'customer');
  if (filters.participantCode) query = query.where('p.participant_code', '=', filters.participantCode);
  if (filters.email) query = query.where(emailKey('p.email'), '=', filters.email.toLowerCase());
  if (filters.status) query = query.where('p.status', '=', filters.status);
  if (filters.bornAfter) {
    query = query.where(sql<string>`s.payload ->> 'date_of_birth'`, '>', filters.bornAfter);
  }
  if (filters.matchesNothing) query = query.where(sql<boolean>`false`);
  const { rows, count } = await rowsAndCount(
    page.offset,
    () =>
      query
        .select([
          'p.participant_code',
          'p.first_name',
          'p.last_name',
          'p.email',
          'p.status',
          'p.reason_code',
          'p.updated_at',
          sql<string | null>`s.payload ->> 'jurisdiction_code'`.as('jurisdiction_code'),
        ])
        .orderBy('p.created_at')
        .orderBy('p.participant_code')
        .limit(page.limit)
        .offset(page.offset)
        .execute(),
    () => countOf(query),
  );
  return { rows, total: count };
}
