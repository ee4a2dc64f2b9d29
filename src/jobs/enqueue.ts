import { sql } from 'kysely';
import type { Executor } from '../store/database.ts';

export interface EnqueueOptions {
  runAt?: Date;
  /** Jobs in one named queue run one at a time, in order (graphile-worker's queue_name). */
  queueName?: string;
  jobKey?: string;
  maxAttempts?: number;
}

/**
 * Adds a graphile-worker job with the caller's executor, so a job enqueued inside a transaction exists
 * exactly when that transaction commits (DESIGN §5: the outbox and the jobs commit with the change).
 */
export async function enqueueJob(
  db: Executor,
  task: string,
  payload: object,
  options: EnqueueOptions = {},
): Promise<void> {
  await sql`select graphile_worker.add_job(
      ${task}::text,
      ${JSON.stringify(payload)}::json,
      queue_name => ${options.queueName ?? null}::text,
      run_at => ${options.runAt ?? null}::timestamptz,
      max_attempts => ${options.maxAttempts ?? 25}::int,
      job_key => ${options.jobKey ?? null}::text
    )`.execute(db);
}
