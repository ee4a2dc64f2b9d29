import type { CronItem, Task, TaskList } from 'graphile-worker';
import { serialCronItem } from '../../jobs/cron.ts';
import { tellOperator } from '../../jobs/task-log.ts';
import { PURGE_QUOTES_TASK, type QuotesService } from './quotes.service.ts';

/**
 * Background work of quotes: the hourly purge of quotes that expired without being executed. It is a
 * graphile-worker cron item, so it runs once per hour on any number of worker processes (the queue records
 * each firing), and missed hours are not caught up (the next run purges what they would have).
 */
export function quotesTaskList(quotes: QuotesService): TaskList {
  const purge: Task = async (_payload, helpers) => {
    const purged = await quotes.purgeExpired();
    if (purged > 0) tellOperator(helpers, `${PURGE_QUOTES_TASK}: ${purged} expired quotes purged`);
  };
  return { [PURGE_QUOTES_TASK]: purge };
}

export const quotesCronItems: CronItem[] = [serialCronItem(PURGE_QUOTES_TASK, '17 * * * *')];
