import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sql } from 'kysely';
import { serviceEnv, startReadyWorker, workersBesideApiService } from '../helpers/webhook-processes.ts';
import { record, startWebhookReceiver, waitFor } from '../helpers/webhook-receiver.ts';

/**
 * A rolling deploy: the worker holding a lane's partition is stopped (SIGTERM) while its attempt is under way.
 * It gives its partitions back at once, and the other worker takes them then, not at its next poll (a minute
 * here) or when the stopped worker's lease would have run out (35 s here).
 */
const setup = workersBesideApiService();
const { workers, receivers } = setup;

test("a stopping worker's lanes are taken by another worker at once", async () => {
  const { svc } = setup;
  const db = svc.runtime.store.db;
  const env = serviceEnv(svc, { SVC_WORKER_POLL_INTERVAL_MS: '60000', SVC_WEBHOOK_TIMEOUT_MS: '28000' });
  workers.push(await startReadyWorker(env), await startReadyWorker(env));
  let slowFirst = true;
  const receiver = await startWebhookReceiver((d) => {
    if (JSON.parse(d.rawBody).i === 0 && slowFirst) {
      slowFirst = false;
      // Still under way when its worker is stopped: cut short, due again at once.
      return { status: 200, delayMs: 5_000 };
    }
    return 200;
  });
  receivers.push(receiver);
  const { platform } = await svc.newPlatform();
  const code = platform.platform_code;
  await svc.admin.put(`/platforms/${code}/webhook`, { url: receiver.url, secret: 'handoff-secret' });
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) ids.push(await record(db, code, 'trade:handoff', { i }));
  await waitFor(() => receiver.deliveries.some((d) => d.notificationId === ids[0]), 'the first attempt');
  const { owner } = (
    await sql<{ owner: string }>`
      select owner from webhook_partitions
      where lane_partition = webhook_lane_partition(${code}, 'trade:handoff')`.execute(db)
  ).rows[0]!;
  const holder = workers.find((w) => w.child.pid === Number(owner.split(':')[1]))!;
  // The stopped worker starts nothing after SIGTERM: whatever arrives from then on, the first notification's
  // attempt again included, the other worker sent. (It may arrive before the stopped worker has quite exited:
  // the partitions are given back before the last connections close.)
  const stoppedAt = Date.now();
  holder.child.kill('SIGTERM');
  await holder.exited;
  await waitFor(
    () => ids.every((id) => receiver.deliveries.some((d) => d.notificationId === id && d.at >= stoppedAt)),
    'every notification, by the other worker',
    10_000,
  );
  const order = receiver.deliveries.map((d) => JSON.parse(d.rawBody).i as number);
  assert.deepEqual(order, [0, 0, 1, 2, 3, 4], 'the cut attempt again first, then the rest in order');
});
