import { createWebhookDelivery, type WebhookDelivery } from '../../src/domain/webhooks/webhook-delivery.ts';
import { createWebhookMetrics } from '../../src/domain/webhooks/webhooks.metrics.ts';
import { systemClock } from '../../src/lib/clock.ts';
import type { Db } from '../../src/store/database.ts';
import type { TestService } from './test-service.ts';

/**
 * Webhook delivery as `svc`'s runtime would build it, in the test's own process, for a test that starts (and
 * watches) a worker side of its own: on `db` (the runtime's by default), its poll every `pollIntervalMs` (the
 * configuration's by default).
 */
export function inProcessDelivery(
  svc: TestService,
  { db = svc.runtime.store.db, pollIntervalMs }: { db?: Db; pollIntervalMs?: number } = {},
): WebhookDelivery {
  const { config } = svc.runtime;
  return createWebhookDelivery({
    db,
    config:
      pollIntervalMs === undefined ? config : { ...config, worker: { ...config.worker, pollIntervalMs } },
    secretKey: svc.runtime.secrets.secretKey,
    clock: systemClock,
    metrics: createWebhookMetrics(db),
  });
}

/** A logger for a worker side whose log lines the test does not read. */
export const QUIET_LOGGER = { info: () => {}, warn: () => {}, error: () => {} };
