import { EventEmitter } from 'node:events';
import {
  Logger,
  parseCronItems,
  run,
  type CronItem,
  type Runner,
  type TaskList,
  type WorkerEvents,
} from 'graphile-worker';
import type pg from 'pg';
import type { FastifyBaseLogger } from 'fastify';
import type { FOR_THE_OPERATOR } from './task-log.ts';
import { WorkerLiveness } from './worker-liveness.ts';
import { JOB_QUEUE_SCHEMA } from '../store/migrate.ts';

/**
 * graphile-worker's log lines as ours: errors and warnings as they are, its info lines (every job started and
 * completed) at debug, but a task's own line marked for the operator (task-log.ts) at info.
 */
export function queueLogger(log: FastifyBaseLogger): Logger {
  return new Logger((scope) => (level, message, meta) => {
    // Typed by the mark itself, so that the two cannot drift apart.
    const { svcForTheOperator, error, ...rest } = (meta ?? {}) as Partial<typeof FOR_THE_OPERATOR> & {
      error?: unknown;
    };
    const entry = {
      scope: { label: scope.label, taskIdentifier: scope.taskIdentifier, jobId: scope.jobId },
      ...rest,
      // graphile-worker passes its errors as `error`; pino serializes `err` (type, message, stack): under
      // `error` one was logged as `{}`, or as a pg error's fields without its message (probe).
      ...(error === undefined ? {} : { err: error }),
    };
    if (level === 'error') log.error(entry, message);
    else if (level === 'warning') log.warn(entry, message);
    else if (level === 'info' && svcForTheOperator) log.info(entry, message);
    else log.debug(entry, message);
  });
}

/**
 * Runs the graphile-worker job queue (DESIGN §5: SKIP LOCKED claims, LISTEN/NOTIFY wake-ups, any number
 * of worker processes). Signals are handled by our entry point, not by the library.
 */
export async function startWorker(options: {
  pool: pg.Pool;
  taskList: TaskList;
  /** Recurring tasks (graphile-worker cron; no crontab file is read). */
  cronItems?: CronItem[];
  /** Tasks always enqueued with a job key (task-list.ts `keyedTasks`). */
  keyedTasks?: readonly string[];
  concurrency: number;
  pollIntervalMs: number;
  logger: FastifyBaseLogger;
}): Promise<Runner> {
  const log = options.logger.child({ component: 'worker' });
  const logger = queueLogger(log);
  // Heartbeats for this process's worker ids, and the release of jobs held by dead processes.
  const liveness = new WorkerLiveness({
    pool: options.pool,
    keyedTasks: options.keyedTasks,
    log,
    onOrphans: (jobIds) =>
      log.warn(
        { jobIds },
        'jobs of this process left locked after their end could not be recorded (a database outage): unlocked to run again',
      ),
  });
  const events: WorkerEvents = new EventEmitter();
  // The id jobs are locked with (`locked_by`) is the worker pool's, not its workers' (graphile-worker 0.17):
  // heartbeating the workers' ids left every running job looking like a dead process's, and every process's
  // reaper unlocked it, so a job running longer than a reap period was started again beside itself.
  events.on('pool:create', ({ workerPool }) => liveness.add(workerPool.id));
  events.on('pool:release', ({ workerPool }) => liveness.remove(workerPool.id));
  // Which jobs run here: one left locked by this process once it ended (its end not recorded) is freed (reap).
  events.on('job:start', ({ job }) => liveness.jobStarted(job.id));
  events.on('job:complete', ({ job }) => liveness.jobFinished(job.id));
  const runner = await run({
    pgPool: options.pool,
    schema: JOB_QUEUE_SCHEMA,
    taskList: options.taskList,
    parsedCronItems: parseCronItems(options.cronItems ?? []),
    concurrency: options.concurrency,
    pollInterval: options.pollIntervalMs,
    noHandleSignals: true,
    logger,
    events,
  });
  liveness.start();
  const stop = runner.stop.bind(runner);
  runner.stop = async (reason?: string) => {
    await stop(reason);
    await liveness.stop();
  };
  return runner;
}
