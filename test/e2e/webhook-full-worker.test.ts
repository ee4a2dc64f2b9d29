import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sql } from 'kysely';
import { recordAnyNotification } from '../../src/domain/webhooks/outbox.ts';
import { serviceEnv, startReadyWorker, workersBesideApiService } from '../helpers/webhook-processes.ts';
import { record, startWebhookReceiver, waitFor } from '../helpers/webhook-receiver.ts';

/**
 * A worker whose every slot is taken by a receiver that hangs does not keep the lanes it claimed meanwhile
 * from a worker with room: after a second of waiting it gives back every partition it is not working
 * (announced), and takes none until a slot frees. Before, they waited for its slot, up to the attempt timeout
 * (30 s here). (The lanes of the hanging lanes' own partitions wait for them: 1 in 64 of the lanes each.)
 * An attempt running past a second parks its lane and frees its slot, but a platform parks at most its share of
 * the slots (one, with one slot): the platform's second hanging lane keeps the slot, and the worker is full.
 */
const setup = workersBesideApiService();
const { workers, receivers } = setup;

test("lanes a full worker cannot start go to a worker with room, well before the full one's slot frees", async () => {
  const { svc } = setup;
  const db = svc.runtime.store.db;
  const env = serviceEnv(svc, { SVC_WORKER_POLL_INTERVAL_MS: '60000', SVC_WEBHOOK_TIMEOUT_MS: '30000' });
  const receiver = await startWebhookReceiver((d) => (JSON.parse(d.rawBody).hang ? 'hang' : 200));
  receivers.push(receiver);
  const newPlatformOnReceiver = async () => {
    const code = (await svc.newPlatform()).platform.platform_code;
    await svc.admin.put(`/platforms/${code}/webhook`, { url: receiver.url });
    return code;
  };
  const hangingPlatform = await newPlatformOnReceiver();
  const other = await newPlatformOnReceiver();

  const full = await startReadyWorker({ ...env, SVC_WORKER_CONCURRENCY: '1' });
  workers.push(full);
  await record(db, hangingPlatform, 'trade:hang-1', { hang: true });
  await record(db, hangingPlatform, 'trade:hang-2', { hang: true });
  // The first is parked after a second; the second then takes the one slot, and keeps it.
  await waitFor(() => receiver.deliveries.length === 2, 'both hanging attempts, the second in the one slot');
  // Lanes of other partitions than the hanging ones'.
  const partitionOf = async (platform: string, resource: string) =>
    (await sql<{ p: number }>`select webhook_lane_partition(${platform}, ${resource})::int as p`.execute(db))
      .rows[0]!.p;
  const hanging = new Set([
    await partitionOf(hangingPlatform, 'trade:hang-1'),
    await partitionOf(hangingPlatform, 'trade:hang-2'),
  ]);
  const waiting: string[] = [];
  for (let i = 0; waiting.length < 3; i++)
    if (!hanging.has(await partitionOf(other, `trade:waiting-${i}`))) waiting.push(`trade:waiting-${i}`);
  // In one transaction: one NOTIFY, one read and one claim by the full worker, which cannot start them.
  const ids = await db.transaction().execute(async (trx) => {
    const recorded: string[] = [];
    for (const [i, resourceKey] of waiting.entries()) {
      recorded.push(
        await recordAnyNotification(trx, {
          platformCode: other,
          payloadType: 'trade_status_changed',
          resourceKey,
          payload: { i },
        }),
      );
    }
    return recorded;
  });
  await waitFor(
    () => /partitions not being worked given back to other workers/.test(full.output()),
    'the full worker giving back the lanes it cannot start',
  );
  workers.push(await startReadyWorker(env));
  await waitFor(
    () => ids.every((id) => receiver.deliveries.some((d) => d.notificationId === id)),
    'the three notifications, by the worker with room',
    12_000,
  );
  assert.equal(
    receiver.deliveries.filter((d) => JSON.parse(d.rawBody).hang).length,
    2,
    'the hanging attempts are still the only ones of their lanes',
  );
});
