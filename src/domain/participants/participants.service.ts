import { sql } from 'kysely';
import { newParticipantCode } from '../../lib/ids.ts';
import type { Executor, Trx } from '../../store/database.ts';
import type { DomainDeps } from '../deps.ts';
import { conflict, invalid, notFound, pgErrorCode, PG_UNIQUE_VIOLATION } from '../errors.ts';
import { recordNotification } from '../webhooks/outbox.ts';
import { findParticipant } from './participants.repository.ts';

export const PARTICIPANT_STATUSES = [
  'submitted',
  'approved',
  'rejected',
  'locked',
  'disabled',
  'divested',
  'closed',
] as const;
export type ParticipantStatus = (typeof PARTICIPANT_STATUSES)[number];

export interface ParticipantView {
  participant_code: string;
  platform_code: string;
  email: string | null;
  first_name: string | null;
  last_name: string | null;
  status: string;
  reason_code: string | null;
  created_at: number;
  updated_at: number;
}

type ParticipantRow = NonNullable<Awaited<ReturnType<typeof findParticipant>>>;

export function participantView(row: ParticipantRow): ParticipantView {
  return {
    participant_code: row.participant_code,
    platform_code: row.platform_code,
    email: row.email,
    first_name: row.first_name,
    last_name: row.last_name,
    status: row.status,
    reason_code: row.reason_code,
    created_at: row.created_at.getTime(),
    updated_at: row.updated_at.getTime(),
  };
}

/** wire-contract §5: participant = {participant_code, participant_status, reason_code?, timestamp}. */
export async function recordParticipantStatus(
  trx: Executor,
  row: ParticipantRow,
  timestamp: number,
): Promise<void> {
  await recordNotification(trx, {
    platformCode: row.platform_code,
    payloadType: 'participant_status_changed',
    resourceKey: `participant:${row.participant_code}`,
    payload: {
      participant_code: row.participant_code,
      participant_status: row.status,
      ...(row.reason_code ? { reason_code: row.reason_code } : {}),
      timestamp,
    },
  });
}

export interface NewParticipant {
  platform_code: string;
  email: string;
  first_name: string;
  last_name: string;
  status?: ParticipantStatus;
}

/**
 * Inserts a customer participant with a fresh 6-character code inside the caller's transaction, retrying
 * on the (rare) code collision with a savepoint. A duplicate email on the platform is a conflict.
 */
export async function insertParticipant(
  trx: Trx,
  input: NewParticipant,
  timestamp: number,
): Promise<ParticipantRow> {
  for (let attempt = 0; ; attempt++) {
    const code = newParticipantCode();
    await sql`savepoint new_participant`.execute(trx);
    try {
      const row = await trx
        .insertInto('participants')
        .values({
          participant_code: code,
          platform_code: input.platform_code,
          email: input.email,
          first_name: input.first_name,
          last_name: input.last_name,
          status: input.status ?? 'approved',
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      await sql`release savepoint new_participant`.execute(trx);
      await recordParticipantStatus(trx, row, timestamp);
      return row;
    } catch (error) {
      await sql`rollback to savepoint new_participant`.execute(trx);
      const isUnique = pgErrorCode(error) === PG_UNIQUE_VIOLATION;
      const detail = String((error as { constraint?: string }).constraint ?? '');
      if (isUnique && detail === 'participants_platform_email') {
        throw conflict(`participant with email ${input.email} already exists for this platform`);
      }
      if (isUnique && attempt < 5) continue;
      throw error;
    }
  }
}

export function createParticipantsService(deps: DomainDeps) {
  const { db, clock } = deps;
  return {
    /** Operator onboarding (DESIGN §3): the participant exists at once, with the given status. */
    async create(input: NewParticipant): Promise<ParticipantView> {
      const platform = await db
        .selectFrom('platforms')
        .select('platform_code')
        .where('platform_code', '=', input.platform_code)
        .executeTakeFirst();
      if (!platform) throw invalid(`platform_code: platform ${input.platform_code} not found`);
      const row = await db.transaction().execute((trx) => insertParticipant(trx, input, clock.now()));
      return participantView(row);
    },

    async get(participantCode: string): Promise<ParticipantView> {
      const row = await findParticipant(db, participantCode);
      if (!row) throw notFound(`participant ${participantCode} not found`);
      return participantView(row);
    },

    /** A status change and its participant_status_changed notification commit together. */
    async setStatus(
      participantCode: string,
      status: ParticipantStatus,
      reasonCode?: string,
    ): Promise<ParticipantView> {
      const row = await db.transaction().execute(async (trx) => {
        const current = await trx
          .selectFrom('participants')
          .selectAll()
          .where('participant_code', '=', participantCode)
          .forUpdate()
          .executeTakeFirst();
        if (!current || current.kind === 'platform')
          throw notFound(`participant ${participantCode} not found`);
        if (current.status === status && (reasonCode ?? null) === current.reason_code) return current;
        const updated = await trx
          .updateTable('participants')
          .set({ status, reason_code: reasonCode ?? null, updated_at: new Date(clock.now()) })
          .where('participant_code', '=', participantCode)
          .returningAll()
          .executeTakeFirstOrThrow();
        await recordParticipantStatus(trx, updated, clock.now());
        return updated;
      });
      return participantView(row);
    },
  };
}

export type ParticipantsService = ReturnType<typeof createParticipantsService>;
