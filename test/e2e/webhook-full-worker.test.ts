import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sql } from 'kysely';
import { recordNotification } from '../../src/domain/webhooks/outbox.ts';
import { serviceEnv, startReadyWorker, workersBesideApiService } from '../helpers/webhook-processes.ts';
import { record, startWebhookReceiver, waitFor } from '../helpers/webhook-receiver.ts';

/**
 * A worker whose every slot is taken by a receiver that hangs does not keep the lanes it claimed meanwhile
 * from a worker with room: after a second of waiting it gives back every partition it is not working
 * (announced), and takes none until a slot frees. Before, they waited for its slot, up to the attempt timeout
 * (30 s here). (The lanes of the hanging lane's own partition wait for it: 1 in 64 of the lanes.)
 */
const setup = workersBesideApiService();
const { workers, receivers } = setup;

test("lanes a full worker cannot start go to a worker with room, well before the full one's slot frees", async () => {
  const { svc } = setup;
  const db = svc.runtime.store.db;
  const env = serviceEnv(svc, { SVC_WORKER_POLL_INTERVAL_MS: '60000', SVC_WEBHOOK_TIMEOUT_MS: '30000' });
  const receiver = await startWebhookReceiver((d) => (JSON.parse(d.rawBody).hang ? 'hang' : 200));
  receivers.push(receiver);
  const { platform } = await svc.newPlatform();
  const code = platform.platform_code;
  await svc.admin.put(`/platforms/${code}/webhook`, { url: receiver.url });

  const full = await startReadyWorker({ ...env, SVC_WORKER_CONCURRENCY: '1' });
  workers.push(full);
  await record(db, code, 'trade:hang', { hang: true });
  await waitFor(() => receiver.deliveries.length === 1, "the hanging receiver's attempt, in the one slot");
  // Lanes of other partitions than the hanging one's.
  const partitionOf = async (resource: string) =>
    (await sql<{ p: number }>`select webhook_lane_partition(${code}, ${resource})::int as p`.execute(db))
      .rows[0]!.p;
  const hanging = await partitionOf('trade:hang');
  const waiting: string[] = [];
  for (let i = 0; waiting.length < 3; i++)
    if ((await partitionOf(`trade:waiting-${i}`)) !== hanging) waiting.push(`trade:waiting-${i}`);
  // In one transaction: one NOTIFY, one read and one claim by the full worker, which cannot start them.
  const ids = await db.transaction().execute(async (trx) => {
    const recorded: string[] = [];
    for (const [i, resourceKey] of waiting.entries()) {
      recorded.push(
        await recordNotification(trx, {
          platformCode: code,
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
    1,
    'the hanging attempt is still the only one of its lane',
  );
});
