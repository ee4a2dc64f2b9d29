import type { CronItem, Task, TaskList } from 'graphile-worker';
import { Type, type Static } from 'typebox';
import { Value } from 'typebox/value';
import { serialCronItem, SWEEP_SCHEDULE, sweepTask } from '../../jobs/cron.ts';
import { tellOperator } from '../../jobs/task-log.ts';
import {
  EXPIRE_SESSION_TASK,
  PURGE_TOKENS_TASK,
  REVIVE_EXPIRIES_TASK,
  type FundingService,
} from './funding.service.ts';

/** How long past its expiry a session may stay unreported before the sweep adds its expiry job again. */
export const EXPIRY_STALLED_AFTER_MS = 10 * 60_000;

/**
 * Background work of account funding (DESIGN §2 "Workers": session expiry; and the hourly purge of SDK tokens a
 * day past their expiry, a cron item like the other purges). The expiry job is enqueued in the
 * transaction that opens a funding session (SDK token with `fwc`, or fund quote), to run when the session
 * expires (wire-contract §5); it is idempotent, so a retry or a second worker reports the expiry at most once.
 */
export const ExpireSessionJob = Type.Object({ session_id: Type.String({ format: 'uuid' }) });
export type ExpireSessionJob = Static<typeof ExpireSessionJob>;

export function fundingTaskList(funding: FundingService): TaskList {
  const expireSession: Task = async (payload) => {
    // STYLE: job payloads are validated when the job starts.
    if (!Value.Check(ExpireSessionJob, payload)) {
      throw new Error(`${EXPIRE_SESSION_TASK}: invalid payload ${JSON.stringify(payload)}`);
    }
    await funding.expireSession(payload.session_id);
  };
  const reviveStalledExpiries = sweepTask(
    REVIVE_EXPIRIES_TASK,
    () => funding.reviveStalledExpiries(EXPIRY_STALLED_AFTER_MS),
    `sessions unreported ${EXPIRY_STALLED_AFTER_MS / 60_000} min past their expiry`,
  );
  const purgeTokens: Task = async (_payload, helpers) => {
    const purged = await funding.purgeExpiredTokens();
    if (purged > 0) tellOperator(helpers, `${PURGE_TOKENS_TASK}: ${purged} expired SDK tokens purged`);
  };
  return {
    [EXPIRE_SESSION_TASK]: expireSession,
    [REVIVE_EXPIRIES_TASK]: reviveStalledExpiries,
    [PURGE_TOKENS_TASK]: purgeTokens,
  };
}

export const fundingCronItems: CronItem[] = [
  serialCronItem(REVIVE_EXPIRIES_TASK, SWEEP_SCHEDULE),
  // Hourly, as the other purges, at a minute of its own.
  serialCronItem(PURGE_TOKENS_TASK, '23 * * * *'),
];
