import type { CronItem, Task } from 'graphile-worker';

/**
 * A recurring task as graphile-worker's cron runs it on any number of worker processes (each firing recorded
 * once), identified by its task and run serially in a queue of its own: a run still going at the next firing is
 * not joined by that one, which would walk the same rows and wait on the same locks.
 */
export function serialCronItem(task: string, match: string): CronItem {
  return { task, match, identifier: task, options: { queueName: task } };
}

/**
 * The stalled-work sweeps (every 10 minutes: account creations, tenant changes, funding session expiries,
 * settlements): work whose job used up its attempts is given its job again. At most this many items a run; the
 * next run takes the rest, as revived work leaves the stalled set once its job has run. The settlement sweep goes on
 * where its last run stopped: a trade that cannot settle stays overdue (trades.service.ts).
 */
export const REVIVE_BATCH = 500;
export const SWEEP_SCHEDULE = '*/10 * * * *';

/** A sweep's task: runs `revive` and warns when it found stalled work (`what`: "<n> <what> given their job again"). */
export function sweepTask(task: string, revive: () => Promise<number>, what: string): Task {
  return async (_payload, helpers) => {
    const revived = await revive();
    if (revived > 0) helpers.logger.warn(`${task}: ${revived} ${what} given their job again`);
  };
}
