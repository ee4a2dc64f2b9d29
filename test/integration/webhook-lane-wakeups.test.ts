import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import {
  record,
  startWebhookReceiver,
  waitFor,
  type ReceivedDelivery,
  type TestReceiver,
} from '../helpers/webhook-receiver.ts';

/**
 * A worker gives a lane back with work left (a retry due later, notifications recorded while it held the
 * lane, more than one claim takes): that work goes out when it is due, not when the dispatcher next polls or
 * a lease runs out. The poll here is a minute and the lease 35 s, so the waits below (10 s) tell
 * "woken when the lane was given back" from either.
 */
let svc: TestService;
let receiver: TestReceiver;
before(async () => {
  svc = await startTestService({
    env: {
      SVC_ROLE: 'all',
      SVC_WORKER_POLL_INTERVAL_MS: '60000',
      SVC_WEBHOOK_TIMEOUT_MS: '28000',
      // Every retry releases the lane (longer than the 1 s a worker waits for one in place).
      SVC_WEBHOOK_FAST_RETRY_DELAY_MS: '1500',
    },
  });
  receiver = await startWebhookReceiver(() => 200);
});
after(async () => {
  await receiver?.close();
  await svc?.close();
});

const WAIT_MS = 10_000;

async function platformWithWebhook(): Promise<string> {
  const { platform } = await svc.newPlatform();
  await svc.admin.put(`/platforms/${platform.platform_code}/webhook`, {
    url: receiver.url,
    secret: 'wake-secret',
  });
  return platform.platform_code;
}

const arrived = (ids: string[]) => () =>
  ids.every((id) => receiver.deliveries.some((d) => d.notificationId === id && d.at > 0));

test('notifications recorded while a worker holds their lane, more than one claim takes, follow at once', async () => {
  const code = await platformWithWebhook();
  const db = svc.runtime.store.db;
  let hold!: () => void;
  const held = new Promise<void>((resolve) => (hold = resolve));
  receiver.setHandler(async (d: ReceivedDelivery) => {
    // The lane's first attempt waits until the rest are recorded: their NOTIFYs find the lane held.
    if (JSON.parse(d.rawBody).i === 0) await held;
    return 200;
  });
  const first = await record(db, code, 'trade:held', { i: 0 });
  await waitFor(() => receiver.deliveries.some((d) => d.notificationId === first), 'the first attempt');
  const rest: string[] = [];
  // 45: the lane's notifications take three claims of 20 once it is given back.
  for (let i = 1; i <= 45; i++) rest.push(await record(db, code, 'trade:held', { i }));
  hold();
  await waitFor(arrived(rest), 'the notifications recorded while the lane was held', WAIT_MS);
  const order = receiver.deliveries
    .filter((d) => d.notificationId !== first)
    .map((d) => JSON.parse(d.rawBody).i as number);
  assert.deepEqual(
    order,
    rest.map((_, i) => i + 1),
    'in order, each once',
  );
});

test('a retry due later than a worker waits for in place goes out on time, not at the next poll', async () => {
  const code = await platformWithWebhook();
  let calls = 0;
  receiver.setHandler(() => (++calls === 1 ? 500 : 200));
  const id = await record(svc.runtime.store.db, code, 'trade:retry');
  await waitFor(
    () => receiver.deliveries.filter((d) => d.notificationId === id).length >= 2,
    'the retry 1.5 s after the failed attempt',
    WAIT_MS,
  );
  const [failed, retried] = receiver.deliveries.filter((d) => d.notificationId === id);
  assert.ok(retried!.at - failed!.at >= 1_500, 'not before the retry is due');
});
