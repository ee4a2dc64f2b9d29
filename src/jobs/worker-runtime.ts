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
import { WorkerLiveness } from './worker-liveness.ts';

/**
 * Runs the graphile-worker job queue (DESIGN §5: SKIP LOCKED claims, LISTEN/NOTIFY wake-ups, any number
 * of worker processes). Signals are handled by our entry point, not by the library.
 */
export async function startWorker(options: {
  pool: pg.Pool;
  taskList: TaskList;
  /** Recurring tasks (graphile-worker cron; no crontab file is read). */
  cronItems?: CronItem[];
  concurrency: number;
  pollIntervalMs: number;
  logger: FastifyBaseLogger;
}): Promise<Runner> {
  const log = options.logger.child({ component: 'worker' });
  const logger = new Logger((scope) => (level, message, meta) => {
    const entry = {
      scope: { label: scope.label, taskIdentifier: scope.taskIdentifier, jobId: scope.jobId },
      ...meta,
    };
    if (level === 'error') log.error(entry, message);
    else if (level === 'warning') log.warn(entry, message);
    else log.debug(entry, message);
  });
  // Heartbeats for this process's worker ids, and the release of jobs held by dead processes.
  const liveness = new WorkerLiveness({
    pool: options.pool,
    onError: (err) => log.warn({ err }, 'worker liveness check failed'),
  });
  const events: WorkerEvents = new EventEmitter();
  events.on('worker:create', ({ worker }) => liveness.add(worker.workerId));
  events.on('worker:stop', ({ worker }) => liveness.remove(worker.workerId));
  const runner = await run({
    pgPool: options.pool,
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
