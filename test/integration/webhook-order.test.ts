import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import {
  notificationState,
  record,
  startWebhookReceiver,
  waitFor,
  type ReceivedDelivery,
  type TestReceiver,
} from '../helpers/webhook-receiver.ts';

/**
 * Issue 4 point 4 (wire-contract §5 "Order"): for one platform and one resource key, a notification is not
 * attempted while an earlier one for that key is pending or retrying; other keys keep flowing.
 */
let svc: TestService;
let receiver: TestReceiver;
/** Events (`<key>#<event>` of the payload) the receiver answers 500 to, for as long as they are in the set. */
const failing = new Set<string>();
const eventOf = (d: ReceivedDelivery) => {
  const body = JSON.parse(d.rawBody) as { key?: string; event?: number };
  return `${body.key}#${body.event}`;
};
before(async () => {
  svc = await startTestService({
    env: {
      SVC_ROLE: 'all',
      SVC_WEBHOOK_FAST_RETRY_DELAY_MS: '20',
      SVC_WEBHOOK_RETRY_SCHEDULE: '300ms,400ms,500ms,600ms',
      SVC_WEBHOOK_TIMEOUT_MS: '1000',
    },
  });
  receiver = await startWebhookReceiver((d) => (failing.has(eventOf(d)) ? 500 : 200));
});
after(async () => {
  await receiver?.close();
  await svc?.close();
});

const db = () => svc.runtime.store.db;
const receivedIds = () => receiver.deliveries.map((d) => d.notificationId);

async function platformWithWebhook() {
  const { platform } = await svc.newPlatform();
  await svc.admin.put(`/platforms/${platform.platform_code}/webhook`, {
    url: receiver.url,
    secret: 'order-secret',
  });
  return platform.platform_code;
}

async function recordAll(code: string, key: string, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 1; i <= n; i++) ids.push(await record(db(), code, key, { key, event: i }));
  return ids;
}

/** Index in the receiver's log of the first delivery of `id` (its first attempt that got through). */
function firstDeliveredAt(id: string, log: ReceivedDelivery[]): number {
  return log.findIndex((d) => d.notificationId === id);
}

test("a failing first event of trade X holds X's later events; trade Y flows; X follows in order once it succeeds", async () => {
  const code = await platformWithWebhook();
  failing.add('trade:X#1');
  const [x1, ...xLater] = await recordAll(code, 'trade:X', 3);
  const y = await recordAll(code, 'trade:Y', 3);

  // Y's events all arrive while X1 keeps failing and retrying.
  await waitFor(() => y.every((id) => receivedIds().includes(id)), "Y's events");
  await waitFor(async () => ((await notificationState(db(), x1!))?.attempt_count ?? 0) >= 3, 'X1 retried');
  assert.equal((await notificationState(db(), x1!))?.status, 'retrying');
  for (const id of xLater) {
    assert.ok(!receivedIds().includes(id), "X's later events are not attempted while X1 is retrying");
    assert.deepEqual(
      { ...(await notificationState(db(), id)) },
      { status: 'pending', status_reason: null, attempt_count: 0, round_attempts: 0 },
    );
  }

  // X1 gets through: X2 and X3 follow, in order, after it.
  const failedSoFar = receiver.deliveries.length;
  failing.delete('trade:X#1');
  await waitFor(() => xLater.every((id) => receivedIds().includes(id)), "X's later events");
  const x = receiver.deliveries.slice(failedSoFar).filter((d) => [x1, ...xLater].includes(d.notificationId));
  assert.deepEqual(
    x.map((d) => d.notificationId),
    [x1, ...xLater],
  );
  assert.deepEqual(
    x.map((d) => eventOf(d)),
    ['trade:X#1', 'trade:X#2', 'trade:X#3'],
  );
});

test("when X's first event is dead-lettered, the rest follow in order", async () => {
  const code = await platformWithWebhook();
  failing.add('trade:Z#1');
  const [z1, ...zLater] = (await recordAll(code, 'trade:Z', 3)) as [string, ...string[]];
  await waitFor(
    async () => (await notificationState(db(), z1))?.status === 'dead',
    'Z1 dead-lettered',
    20_000,
  );
  await waitFor(() => zLater.every((id) => receivedIds().includes(id)), "Z's later events");
  const all = receiver.deliveries;
  const lastZ1 = all.map((d) => d.notificationId).lastIndexOf(z1);
  assert.ok(firstDeliveredAt(zLater[0]!, all) > lastZ1, 'Z2 only after the last attempt of Z1');
  assert.ok(firstDeliveredAt(zLater[1]!, all) > firstDeliveredAt(zLater[0]!, all), 'Z3 after Z2');
  assert.equal(all.filter((d) => d.notificationId === z1).length, 1 + 4 + 4);
});

test('many resources with random failures: each resource is delivered in order, resources interleave', async () => {
  const code = await platformWithWebhook();
  const keys = Array.from({ length: 12 }, (_, i) => `balance:acct-${i}`);
  const byKey = new Map<string, string[]>(keys.map((k) => [k, []]));
  const flaky = new Map<string, number>();
  receiver.setHandler((d) => {
    // Each notification fails its first 0–2 attempts (decided once per id), then succeeds.
    const left = flaky.get(d.notificationId) ?? Math.floor(Math.random() * 3);
    flaky.set(d.notificationId, left - 1);
    return left > 0 ? 503 : 200;
  });
  for (let round = 0; round < 5; round++) {
    for (const key of keys) {
      byKey.get(key)!.push(await record(db(), code, key, { key, event: round }, 'account_balance.changed'));
    }
  }
  const all = [...byKey.values()].flat();
  await waitFor(
    async () => {
      const rows = await db()
        .selectFrom('webhook_notifications')
        .select('status')
        .where('platform_code', '=', code)
        .execute();
      return rows.length === all.length && rows.every((r) => r.status === 'delivered');
    },
    'every notification delivered',
    30_000,
  );
  const delivered = receiver.deliveries.filter((d) => all.includes(d.notificationId));
  for (const [key, ids] of byKey) {
    // Attempts of a key never go back to an earlier notification once a later one was attempted.
    const attempted = delivered
      .filter((d) => ids.includes(d.notificationId))
      .map((d) => ids.indexOf(d.notificationId));
    for (let i = 1; i < attempted.length; i++) {
      assert.ok(attempted[i]! >= attempted[i - 1]!, `${key}: attempts in order, got ${attempted.join(',')}`);
    }
  }
  receiver.setHandler((d) => (failing.has(eventOf(d)) ? 500 : 200));
});
