import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import { recordAnyNotification } from '../../src/domain/webhooks/outbox.ts';
import { verifyWebhook } from '../../src/sdk/webhook-verify.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import {
  serviceEnv,
  startReadyWorker,
  stopWorkerProcess,
  type WorkerProcess,
} from '../helpers/webhook-processes.ts';
import { startWebhookReceiver, waitFor, type TestReceiver } from '../helpers/webhook-receiver.ts';

/**
 * Issue 4 point 7, the durability test: 2,000 notifications are produced while the worker process is
 * SIGKILLed at random moments (at least 10 times, each time mid-work, then started again) and the receiver
 * answers 500 to 20 % of attempts at random. Every notification must be delivered at least once and none
 * lost; the duplicates (deliveries a killed worker made but could not record) are counted and printed.
 *
 * Short retry schedules and a 2 s request timeout (so a dead worker's lane lease, timeout + 5 s, frees up
 * quickly) come from the environment of the worker processes, as an operator would set them.
 */
const NOTIFICATIONS = 2_000;
const LANES = 200;
const MIN_KILLS = 10;
const SECRET = 'durability-secret';

let svc: TestService;
let receiver: TestReceiver;
let worker: WorkerProcess | null = null;
before(async () => {
  svc = await startTestService();
});
after(async () => {
  if (worker) await stopWorkerProcess(worker);
  await receiver?.close();
  await svc?.close();
});

test('2,000 notifications, worker SIGKILLed 10+ times, receiver failing 20 %: all delivered, none lost', async () => {
  const started = Date.now();
  const okDeliveries = new Map<string, number>();
  let badSignatures = 0;
  receiver = await startWebhookReceiver((d) => {
    try {
      verifyWebhook(d.rawBody, d.headers, SECRET);
    } catch {
      badSignatures++;
      return 400;
    }
    if (Math.random() < 0.2) return 500;
    okDeliveries.set(d.notificationId, (okDeliveries.get(d.notificationId) ?? 0) + 1);
    return 200;
  });
  const db = svc.runtime.store.db;
  const { platform } = await svc.newPlatform();
  const code = platform.platform_code;
  await svc.admin.put(`/platforms/${code}/webhook`, { url: receiver.url, secret: SECRET });

  const env = serviceEnv(svc, {
    SVC_WEBHOOK_TIMEOUT_MS: '2000',
    SVC_WEBHOOK_FAST_RETRY_DELAY_MS: '20',
    // 15 attempts per round: with 20 % failures a dead letter has odds of 0.2^15.
    SVC_WEBHOOK_RETRY_SCHEDULE: '100ms,200ms,400ms,800ms,1s,1s,1s,1s,1s,1s',
    SVC_WORKER_POLL_INTERVAL_MS: '200',
  });

  // The producer: 2,000 notifications in transactions of 1-5, over 200 resources, paced over ~20 s.
  const ids: string[] = [];
  const order = new Map<string, string[]>();
  const produce = async () => {
    let n = 0;
    while (n < NOTIFICATIONS) {
      const batch = Math.min(NOTIFICATIONS - n, 1 + Math.floor(Math.random() * 5));
      const made = await db.transaction().execute(async (trx) => {
        const out: Array<[string, string]> = [];
        for (let i = 0; i < batch; i++) {
          const key = `trade:D${(n + i) % LANES}`;
          const id = await recordAnyNotification(trx, {
            platformCode: code,
            payloadType: 'trade_status_changed',
            resourceKey: key,
            payload: { key, seq: n + i },
          });
          out.push([key, id]);
        }
        return out;
      });
      for (const [key, id] of made) {
        ids.push(id);
        order.set(key, [...(order.get(key) ?? []), id]);
      }
      n += batch;
      await new Promise((r) => setTimeout(r, 10 * batch));
    }
  };
  const production = produce();
  let produced = false;
  void production.then(() => (produced = true));

  // The killer: one worker process at a time, SIGKILLed at a random moment 0.3-2 s after it started working.
  let kills = 0;
  while (kills < MIN_KILLS || !produced) {
    worker = await startReadyWorker(env);
    await new Promise((r) => setTimeout(r, 300 + Math.random() * 1_700));
    worker.child.kill('SIGKILL');
    assert.equal((await worker.exited).signal, 'SIGKILL');
    kills++;
  }
  await production;
  const producedAt = Date.now();

  // A last worker, left running, finishes the work (including the lanes the killed ones held).
  worker = await startReadyWorker(env);
  await waitFor(
    async () => {
      const r = await sql<{ n: number }>`select count(*)::int as n from webhook_notifications
        where platform_code = ${code} and status = 'delivered'`.execute(db);
      return r.rows[0]!.n === NOTIFICATIONS;
    },
    'every notification delivered',
    180_000,
    250,
  );

  assert.equal(ids.length, NOTIFICATIONS);
  const missing = ids.filter((id) => !okDeliveries.has(id));
  assert.deepEqual(missing, [], 'every notification reached the receiver with a 2xx at least once');
  const states = await sql<{ status: string; n: number }>`select status, count(*)::int as n
    from webhook_notifications where platform_code = ${code} group by status`.execute(db);
  assert.deepEqual(states.rows, [{ status: 'delivered', n: NOTIFICATIONS }], 'none dead, none lost');
  assert.equal(badSignatures, 0);
  // Per resource, first deliveries came in the order the notifications were recorded.
  const firstSeen = new Map<string, number>();
  receiver.deliveries.forEach((d, i) => {
    if (!firstSeen.has(d.notificationId)) firstSeen.set(d.notificationId, i);
  });
  for (const [key, laneIds] of order) {
    const positions = laneIds.map((id) => firstSeen.get(id)!);
    assert.deepEqual(
      positions,
      [...positions].sort((a, b) => a - b),
      `${key}: in order`,
    );
  }

  const duplicates = [...okDeliveries.values()].filter((n) => n > 1).length;
  const extra = [...okDeliveries.values()].reduce((sum, n) => sum + n - 1, 0);
  const attempts = receiver.deliveries.length;
  console.log(
    `durability: ${NOTIFICATIONS} notifications, ${kills} SIGKILLs, ${attempts} attempts ` +
      `(${attempts - [...okDeliveries.values()].reduce((a, b) => a + b, 0)} answered 500), ` +
      `all delivered; duplicate deliveries: ${extra} (${duplicates} notifications delivered more than once); ` +
      `${((Date.now() - started) / 1000).toFixed(1)} s in all, ${((Date.now() - producedAt) / 1000).toFixed(1)} s ` +
      `from the end of production to the last delivery`,
  );
});
