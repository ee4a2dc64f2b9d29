import type { Task, TaskList } from 'graphile-worker';
import { Type, type Static } from 'typebox';
import { Value } from 'typebox/value';
import { EXPIRE_SESSION_TASK, type FundingService } from './funding.service.ts';

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
  return { [EXPIRE_SESSION_TASK]: expireSession };
}
