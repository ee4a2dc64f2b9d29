import type { CronItem, Task, TaskList } from 'graphile-worker';
import { Type, type Static } from 'typebox';
import { Value } from 'typebox/value';
import { serialCronItem, SWEEP_SCHEDULE, sweepTask } from '../../jobs/cron.ts';
import { EXPIRE_SESSION_TASK, REVIVE_EXPIRIES_TASK, type FundingService } from './funding.service.ts';

/** How long past its expiry a session may stay unreported before the sweep adds its expiry job again. */
export const EXPIRY_STALLED_AFTER_MS = 10 * 60_000;

/**
 * Background work of account funding (DESIGN §2 "Workers": session expiry). The job is enqueued in the
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
  return { [EXPIRE_SESSION_TASK]: expireSession, [REVIVE_EXPIRIES_TASK]: reviveStalledExpiries };
}

export const fundingCronItems: CronItem[] = [serialCronItem(REVIVE_EXPIRIES_TASK, SWEEP_SCHEDULE)];
