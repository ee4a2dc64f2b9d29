import { sql } from 'kysely';
import type { Executor } from '../store/database.ts';

export interface EnqueueOptions {
  runAt?: Date;
  /**
   * Instead of runAt: due this long after now by the database's clock, which is the one the queue runs jobs by.
   * A job that finds it ran early by the service's clock (a clock behind the database's) waits this way: added
   * again at a `runAt` from the service's clock, it was due at once, and ran again, for as long as the clocks
   * differ.
   */
  delayMs?: number;
  jobKey?: string;
  maxAttempts?: number;
}

/** Calls of add_job for one keyed job before giving up (see below: the second one always adds it). */
const KEYED_ADD_ATTEMPTS = 3;

/**
 * Adds a graphile-worker job with the caller's executor, so a job enqueued inside a transaction exists
 * exactly when that transaction commits (DESIGN §5: the outbox and the jobs commit with the change).
 *
 * With a `jobKey`, the job replaces the pending one of that key. graphile-worker's add_jobs (0.17) does that
 * in two statements: it takes the key off a job a worker has locked (it is running: a new one is needed),
 * then inserts, updating the job of that key instead `where locked_at is null`. A worker that locks that job
 * between the two leaves add_job with nothing added and no error, and the running job, started from the old
 * state, may find nothing to do: an operator's advance racing the settlement timer left the trade `active`
 * with no job to settle it (review: 11 trades in 400). add_job says so by returning no job id; it is then
 * called again, and finds the job locked, so it takes the key off and inserts.
 */
export async function enqueueJob(
  db: Executor,
  task: string,
  payload: object,
  options: EnqueueOptions = {},
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const { rows } = await sql<{ id: string | null }>`select (graphile_worker.add_job(
        ${task}::text,
        ${JSON.stringify(payload)}::json,
        run_at => ${
          options.delayMs !== undefined
            ? sql`now() + ${options.delayMs} * interval '1 millisecond'`
            : sql`${options.runAt ?? null}::timestamptz`
        },
        max_attempts => ${options.maxAttempts ?? 25}::int,
        job_key => ${options.jobKey ?? null}::text
      )).id`.execute(db);
    if (rows[0]?.id != null) return;
    if (attempt === KEYED_ADD_ATTEMPTS) {
      throw new Error(
        `job ${task} (key ${options.jobKey ?? 'none'}) was not added: its key's job kept changing`,
      );
    }
  }
}
