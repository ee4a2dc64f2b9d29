import type { CronItem, TaskList } from 'graphile-worker';
import type { Services } from '../domain/services.ts';
import { tradesCronItems, tradesTaskList } from '../domain/trades/trades.jobs.ts';
import { SETTLE_TASK } from '../domain/trades/trades.service.ts';
import { ACCOUNT_TASKS, accountsCronItems, accountsTaskList } from '../domain/accounts/accounts.jobs.ts';
import { fundingCronItems, fundingTaskList } from '../domain/funding/funding.jobs.ts';
import { EXPIRE_SESSION_TASK } from '../domain/funding/funding.service.ts';
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

/**
 * The tasks that are always enqueued with a job key (one pending job per trade, account or session): a job of
 * theirs without a key was superseded by a newer one of its key (see WorkerLiveness.reap).
 */
export const keyedTasks: readonly string[] = [
  SETTLE_TASK,
  ACCOUNT_TASKS.createCustomerAccount,
  ACCOUNT_TASKS.applyTenantChanges,
  EXPIRE_SESSION_TASK,
];

/** Recurring tasks (each in the task list above), run by graphile-worker's cron on the worker processes. */
export const cronItems: CronItem[] = [
  ...accountsCronItems,
  ...fundingCronItems,
  ...quotesCronItems,
  ...webhooksCronItems,
  ...tradesCronItems,
];
