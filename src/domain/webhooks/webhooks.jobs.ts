import type { CronItem, Task, TaskList } from 'graphile-worker';
import { serialCronItem } from '../../jobs/cron.ts';
import { tellOperator } from '../../jobs/task-log.ts';
import { PURGE_NOTIFICATIONS_TASK, type WebhooksService } from './webhooks.service.ts';

/**
 * Background work of webhooks besides delivery (which has its own dispatcher): the hourly purge of delivered
 * and skipped notifications past their retention (SVC_WEBHOOK_RETENTION_DAYS). Without it the outbox, its
 * payloads and its attempts only grow. A graphile-worker cron item, so it runs once per hour on any number of
 * worker processes, and a missed hour is not caught up (the next run purges what it would have).
 */
export function webhooksTaskList(webhooks: WebhooksService): TaskList {
  const purge: Task = async (_payload, helpers) => {
    const purged = await webhooks.purgeFinished({ signal: helpers.abortSignal });
    if (purged > 0) tellOperator(helpers, `${PURGE_NOTIFICATIONS_TASK}: ${purged} notifications purged`);
  };
  return { [PURGE_NOTIFICATIONS_TASK]: purge };
}

export const webhooksCronItems: CronItem[] = [serialCronItem(PURGE_NOTIFICATIONS_TASK, '41 * * * *')];
