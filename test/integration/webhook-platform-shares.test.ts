import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { recordAnyNotification } from '../../src/domain/webhooks/outbox.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import { record, startWebhookReceiver, waitFor, type TestReceiver } from '../helpers/webhook-receiver.ts';

/**
 * A platform with a big backlog of notifications, to a receiver that answers well, does not hold every other
 * platform's notifications until its backlog is delivered: claims share a worker's room among the platforms
 * with due lanes (migration 0024). One worker with two slots here, 300 lanes of the busy platform, each
 * answered in 10 ms.
 */
const BACKLOG = 300;
let svc: TestService;
let busyReceiver: TestReceiver;
let otherReceiver: TestReceiver;
before(async () => {
  svc = await startTestService({ env: { SVC_ROLE: 'all', SVC_WORKER_CONCURRENCY: '2' } });
  busyReceiver = await startWebhookReceiver(() => ({ status: 200, delayMs: 10 }));
  otherReceiver = await startWebhookReceiver(() => 200);
});
after(async () => {
  await busyReceiver?.close();
  await otherReceiver?.close();
  await svc?.close();
});

test("another platform's notification goes out beside a busy platform's backlog, not after it", async (t) => {
  const db = svc.runtime.store.db;
  const busy = (await svc.newPlatform()).platform.platform_code;
  const other = (await svc.newPlatform()).platform.platform_code;
  await svc.admin.put(`/platforms/${busy}/webhook`, { url: busyReceiver.url });
  await svc.admin.put(`/platforms/${other}/webhook`, { url: otherReceiver.url });
  await db.transaction().execute(async (trx) => {
    for (let i = 0; i < BACKLOG; i++)
      await recordAnyNotification(trx, {
        platformCode: busy,
        payloadType: 'trade_status_changed',
        resourceKey: `trade:backlog-${i}`,
        payload: { i },
      });
  });
  await waitFor(() => busyReceiver.deliveries.length >= 10, "the busy platform's first deliveries");

  const before = busyReceiver.deliveries.length;
  const id = await record(db, other, 'trade:other', { other: 1 });
  const delivered = await waitFor(
    () => otherReceiver.deliveries.find((d) => d.notificationId === id),
    "the other platform's notification",
    60_000,
  );
  // Counted up to the delivery itself, not up to when this test noticed it. What may go first: the lanes the
  // worker had claimed and not started when the notification was recorded (its prefetch), and those under
  // way. By due order alone, the whole backlog went first.
  const busyBetween = busyReceiver.deliveries.filter((d) => d.at <= delivered.at).length - before;
  t.diagnostic(`the busy platform's deliveries before the other's: ${busyBetween}`);
  assert.ok(
    busyBetween < 60,
    `the busy platform's deliveries between the other's notification and its delivery: ${busyBetween} of the ${
      BACKLOG - before
    } left`,
  );
  // The backlog still goes out, every notification of it.
  await waitFor(
    () => new Set(busyReceiver.deliveries.map((d) => d.notificationId)).size >= BACKLOG,
    "the busy platform's whole backlog",
    60_000,
  );
});
