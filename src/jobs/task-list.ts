import type { CronItem, TaskList } from 'graphile-worker';
import type { Services } from '../domain/services.ts';
import { tradesTaskList } from '../domain/trades/trades.jobs.ts';
import { accountsTaskList } from '../domain/accounts/accounts.jobs.ts';
import { fundingTaskList } from '../domain/funding/funding.jobs.ts';
import { quotesCronItems, quotesTaskList } from '../domain/quotes/quotes.jobs.ts';
import { webhooksCronItems, webhooksTaskList } from '../domain/webhooks/webhooks.jobs.ts';

/** Every background task, by name. Add an area's tasks here (`<area>.jobs.ts` exports a TaskList). */
export function buildTaskList(services: Services): TaskList {
  return {
    ...tradesTaskList(services.trades),
    ...accountsTaskList(services),
    ...fundingTaskList(services.funding),
    ...quotesTaskList(services.quotes),
    ...webhooksTaskList(services.webhooks),
  };
}

/** Recurring tasks (each in the task list above), run by graphile-worker's cron on the worker processes. */
export const cronItems: CronItem[] = [...quotesCronItems, ...webhooksCronItems];
