import { Logger, run, type Runner, type TaskList } from 'graphile-worker';
import type pg from 'pg';
import type { FastifyBaseLogger } from 'fastify';

/**
 * Runs the graphile-worker job queue (DESIGN §5: SKIP LOCKED claims, LISTEN/NOTIFY wake-ups, any number
 * of worker processes). Signals are handled by our entry point, not by the library.
 */
export async function startWorker(options: {
  pool: pg.Pool;
  taskList: TaskList;
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
  return run({
    pgPool: options.pool,
    taskList: options.taskList,
    concurrency: options.concurrency,
    pollInterval: options.pollIntervalMs,
    noHandleSignals: true,
    logger,
  });
}
