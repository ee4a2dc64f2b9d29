import type { Executor } from '../../store/database.ts';

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
