import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { capturedLogger } from '../helpers/captured-log.ts';
import { verifyWebhook } from '../../src/sdk/webhook-verify.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import {
  eventOf,
  heldAnswer,
  notificationState,
  record,
  recordEvents,
  startWebhookReceiver,
  waitFor,
  type TestReceiver,
} from '../helpers/webhook-receiver.ts';

/**
 * Operator changes reach the lanes being worked (issue 4 points 2-4): a redelivery of an earlier notification
 * holds the later ones of its resource even when a worker is in the middle of that resource, and a new URL or
 * secret applies to the next attempt, not only to the next claim. The receiver holds one delivery until the
 * worker has heard of the change (its log line), so nothing here depends on timing.
 */
const { logger, lines: logLines } = capturedLogger('info');
let svc: TestService;
let first: TestReceiver;
let second: TestReceiver;
before(async () => {
  svc = await startTestService({ env: { SVC_ROLE: 'all', SVC_WEBHOOK_TIMEOUT_MS: '5000' }, logger });
  first = await startWebhookReceiver(() => 200);
  second = await startWebhookReceiver(() => 200);
});
after(async () => {
  await first?.close();
  await second?.close();
  await svc?.close();
});

const db = () => svc.runtime.store.db;
const refreshes = () => logLines.filter((l) => l.includes('webhook lanes read afresh')).length;

async function platformOn(receiver: TestReceiver, secret: string) {
  const { platform } = await svc.newPlatform();
  await svc.admin.put(`/platforms/${platform.platform_code}/webhook`, { url: receiver.url, secret });
  return platform.platform_code;
}

test('an earlier notification redelivered while its resource is being worked goes before the later ones', async () => {
  const code = await platformOn(first, 'order-secret');
  const n1 = await record(db(), code, 'trade:K', { event: 1 });
  await waitFor(async () => (await notificationState(db(), n1))?.status === 'delivered', 'n1 delivered');

  const two = heldAnswer();
  first.setHandler((d) => (eventOf(d) === 2 ? two.answer : 200));
  const [, n3] = await recordEvents(db(), code, 'trade:K', [2, 3]);
  await waitFor(() => first.deliveries.some((d) => eventOf(d) === 2), 'n2 in flight');
  const heard = refreshes();
  await svc.admin.post(`/notifications/${n1}/redeliver`);
  await waitFor(() => refreshes() > heard, 'the worker heard of the redelivery');
  two.release();

  await waitFor(async () => (await notificationState(db(), n3!))?.status === 'delivered', 'n3 delivered');
  assert.deepEqual(first.deliveries.map(eventOf), [1, 2, 1, 3]);
});

test('a new URL and secret apply to the next attempt of a resource being worked', async () => {
  const code = await platformOn(first, 'old-secret');
  const two = heldAnswer();
  first.setHandler((d) => (eventOf(d) === 20 ? two.answer : 200));
  const [, later] = await recordEvents(db(), code, 'trade:M', [20, 21]);
  await waitFor(() => first.deliveries.some((d) => eventOf(d) === 20), 'the first one in flight');
  const heard = refreshes();
  await svc.admin.put(`/platforms/${code}/webhook`, { url: second.url, secret: 'new-secret' });
  await waitFor(() => refreshes() > heard, 'the worker heard of the change');
  two.release();

  await waitFor(async () => (await notificationState(db(), later!))?.status === 'delivered', 'delivered');
  assert.equal(first.deliveries.filter((d) => eventOf(d) === 21).length, 0, 'nothing more to the old URL');
  const moved = second.deliveries.find((d) => eventOf(d) === 21);
  assert.ok(moved, 'the later notification went to the new URL');
  assert.doesNotThrow(() => verifyWebhook(moved.rawBody, moved.headers, 'new-secret'));
});
