import type { TaskList } from 'graphile-worker';
import { DELIVER_LANE_TASK, parseLanePayload } from './delivery-lane.ts';
import type { WebhooksService } from './webhooks.service.ts';

/**
 * The webhook delivery task (wire-contract §5): one job per lane, queued by `recordNotification`, by a
 * lease release, a redelivery or the sweeper (see `webhook-delivery.ts`). The payload is validated here,
 * when the job starts.
 */
export function webhooksTaskList(webhooks: Pick<WebhooksService, 'delivery'>): TaskList {
  return {
    [DELIVER_LANE_TASK]: async (payload, helpers) => {
      const lane = parseLanePayload(payload);
      await webhooks.delivery.deliverLane(lane, {
        signal: helpers.abortSignal,
        // How far behind the queue is: a late job also works other waiting lanes.
        queuedForMs: Date.now() - new Date(helpers.job.run_at).getTime(),
        logger: {
          info: (obj, message) => helpers.logger.info(message, obj as Record<string, unknown>),
          warn: (obj, message) => helpers.logger.warn(message, obj as Record<string, unknown>),
          error: (obj, message) => helpers.logger.error(message, obj as Record<string, unknown>),
        },
      });
    },
  };
}
