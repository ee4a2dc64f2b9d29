import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { recordAnyNotification } from '../../src/domain/webhooks/outbox.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import { record, startWebhookReceiver, waitFor, type TestReceiver } from '../helpers/webhook-receiver.ts';

/**
 * A worker keeps at most SVC_WEBHOOK_MAX_HELD undelivered notifications in memory. A platform whose receiver is down,
 * with more than that waiting in many lanes, does not stop the worker from reading other platforms' new
 * notifications: its lanes, waiting for their retry, keep their first notification only, and the rest are read
 * again, in order, when the receiver is back. (Before, reads after the cursor stopped at the bound until the slots
 * had worked through half, which a receiver that is down never lets them do.)
 */
const LANES = 10;
const PER_LANE = 5;
let svc: TestService;
let downReceiver: TestReceiver;
let otherReceiver: TestReceiver;
before(async () => {
  svc = await startTestService({
    env: {
      SVC_ROLE: 'all',
      SVC_WORKER_CONCURRENCY: '2',
      SVC_WEBHOOK_MAX_HELD: '20',
      SVC_WEBHOOK_FAST_RETRIES: '0',
      SVC_WEBHOOK_RETRY_SCHEDULE: Array(20).fill('2s').join(','),
    },
  });
  downReceiver = await startWebhookReceiver(() => 500);
  otherReceiver = await startWebhookReceiver(() => 200);
});
after(async () => {
  await downReceiver?.close();
  await otherReceiver?.close();
  await svc?.close();
});

test("a receiver that is down with more notifications than a worker holds does not hold back other platforms'", async () => {
  const db = svc.runtime.store.db;
  const down = (await svc.newPlatform()).platform.platform_code;
  const other = (await svc.newPlatform()).platform.platform_code;
  await svc.admin.put(`/platforms/${down}/webhook`, { url: downReceiver.url });
  await svc.admin.put(`/platforms/${other}/webhook`, { url: otherReceiver.url });
  // 50 notifications in 10 lanes, over the bound of 20: each lane's first fails and waits for its retry.
  const ids = new Map<string, string[]>();
  await db.transaction().execute(async (trx) => {
    for (let n = 0; n < PER_LANE; n++)
      for (let lane = 0; lane < LANES; lane++) {
        const resourceKey = `trade:down-${lane}`;
        const id = await recordAnyNotification(trx, {
          platformCode: down,
          payloadType: 'trade_status_changed',
          resourceKey,
          payload: { lane, n },
        });
        ids.set(resourceKey, [...(ids.get(resourceKey) ?? []), id]);
      }
  });
  await waitFor(
    () => new Set(downReceiver.deliveries.map((d) => d.notificationId)).size >= LANES,
    'a failed attempt of each lane of the platform whose receiver is down',
  );

  const otherId = await record(db, other, 'trade:other', { other: 1 });
  await waitFor(
    () => otherReceiver.deliveries.some((d) => d.notificationId === otherId),
    "the other platform's notification, read past the bound",
  );

  // What the worker holds meanwhile: each waiting lane's first notification, within the bound.
  const metrics = await (await fetch(`${svc.url}/metrics`)).text();
  const held = Number(/^svc_webhook_held_notifications (\d+)$/m.exec(metrics)?.[1]);
  assert.ok(held >= LANES && held <= 20, `notifications held in memory: ${held}`);

  // The receiver is back: every notification of every lane is delivered, each lane's in the order recorded.
  const accepted: string[] = [];
  downReceiver.setHandler((delivery) => {
    accepted.push(delivery.notificationId);
    return 200;
  });
  await waitFor(
    () => [...ids.values()].flat().every((id) => accepted.includes(id)),
    'every notification of the lanes that waited',
    30_000,
  );
  for (const [resourceKey, laneIds] of ids) {
    const firstDeliveries = laneIds.map((id) => accepted.indexOf(id));
    assert.deepEqual(
      firstDeliveries,
      [...firstDeliveries].sort((a, b) => a - b),
      `${resourceKey}: delivered in the order recorded`,
    );
  }
});
