import type { CronItem } from 'graphile-worker';

/**
 * A recurring task as graphile-worker's cron runs it on any number of worker processes (each firing recorded
 * once), identified by its task and run serially in a queue of its own: a run still going at the next firing is
 * not joined by that one, which would walk the same rows and wait on the same locks.
 */
export function serialCronItem(task: string, match: string): CronItem {
  return { task, match, identifier: task, options: { queueName: task } };
}
