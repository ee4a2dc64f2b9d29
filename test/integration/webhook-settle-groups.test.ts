import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { recordAnyNotification } from '../../src/domain/webhooks/outbox.ts';
import { inProcessDelivery, QUIET_LOGGER } from '../helpers/in-process-delivery.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import { startWebhookReceiver, waitFor, type TestReceiver } from '../helpers/webhook-receiver.ts';

/**
 * A lane's results go to the database together: each record statement of a lane carries every result the lane
 * made since its previous one. Statements are spaced (SETTLE_GAP_MS) so that many lanes share each; sent one
 * result at a time, a lane's records, and so its return to the book and its next claim, were held to one a gap (review:
 * 40 deliveries a second for one resource). Each statement is a transaction of its own, so the number of
 * distinct `xmin`s among a lane's notifications is the number of statements that recorded them. Here the
 * first record is held (the test locks its row) while the lane delivers the rest.
 */
let svc: TestService;
let receiver: TestReceiver;
before(async () => {
  svc = await startTestService(); // role api: the worker below is the only one delivering
  receiver = await startWebhookReceiver();
});
after(async () => {
  await receiver?.close();
  await svc?.close();
});

/** Holds a lock on a notification's row, in a transaction the test commits: its record waits until then. */
async function lockNotificationRow(notificationId: string): Promise<pg.Client> {
  const locker = new pg.Client({ connectionString: svc.database.url });
  await locker.connect();
  await locker.query('begin');
  await locker.query('select 1 from webhook_notifications where notification_id = $1 for no key update', [
    notificationId,
  ]);
  return locker;
}

/** `count` notifications for one resource, committed together (one read takes them all); their ids in order. */
function recordOnOneResource(platformCode: string, resourceKey: string, count: number): Promise<string[]> {
  return svc.runtime.store.db.transaction().execute(async (trx) => {
    const ids: string[] = [];
    for (let n = 1; n <= count; n++) {
      const payload = { n };
      ids.push(
        await recordAnyNotification(trx, {
          platformCode,
          payloadType: 'trade_status_changed',
          resourceKey,
          payload,
        }),
      );
    }
    return ids;
  });
}

test("a lane's results made while its last record is being written go in its next statement together", async () => {
  const db = svc.runtime.store.db;
  const code = (await svc.newPlatform()).platform.platform_code;
  await svc.admin.put(`/platforms/${code}/webhook`, { url: receiver.url });
  const ids = await recordOnOneResource(code, 'trade:GROUPS', 10);
  // The first notification's record waits for this lock; the attempts do not wait for their records. (All ten
  // take well under LEASE_SLACK_MS, 2 s: after that an attempt would wait for the records to renew the lease.)
  const locker = await lockNotificationRow(ids[0]!);
  const worker = inProcessDelivery(svc, { pollIntervalMs: 20 }).startWorkerSide(QUIET_LOGGER);
  try {
    await waitFor(
      () => ids.every((id) => receiver.deliveries.some((d) => d.notificationId === id)),
      'every notification delivered once',
    );
    await locker.query('commit');
    const delivered = async () => {
      const { rows } = await sql<{ statements: number; delivered: number }>`
        select count(distinct xmin::text)::int as statements,
          (count(*) filter (where status = 'delivered'))::int as delivered
        from webhook_notifications where notification_id = any(${ids}::uuid[])`.execute(db);
      return rows[0]!.delivered === ids.length ? rows[0]! : undefined;
    };
    const { statements } = await waitFor(delivered, 'every delivery recorded');
    // One for the first result (held by the lock), one for the nine made meanwhile; one a result was ten.
    assert.equal(statements, 2, 'settle statements that recorded the lane');
    assert.equal(receiver.deliveries.length, ids.length, 'no notification delivered twice');
  } finally {
    await locker.end();
    await worker.close();
  }
});

test('a stop waits for every statement of a lane, those a statement queued after it included', async () => {
  // A lane's second result of one notification (a fast retry) goes in the statement after the first's: queued by
  // that statement, it was missed by the stop, which closed the connections before the lane's release was
  // written (review). Here the lane's results wait behind a lock until the stop has begun.
  const db = svc.runtime.store.db;
  const code = (await svc.newPlatform()).platform.platform_code;
  // The second notification's first attempt fails: its fast retry makes a second result of it.
  let ids: string[] = [];
  let failed = false;
  const flaky = await startWebhookReceiver((delivery) => {
    if (delivery.notificationId !== ids[1] || failed) return 200;
    failed = true;
    return 500;
  });
  // (The webhook first: a notification recorded without one is skipped.)
  await svc.admin.put(`/platforms/${code}/webhook`, { url: flaky.url });
  ids = await recordOnOneResource(code, 'trade:STOP-SPLIT', 3);
  const locker = await lockNotificationRow(ids[0]!);
  // Its own bookkeeping connections, which the stop closes.
  const worker = inProcessDelivery(svc, { pollIntervalMs: 20 }).startWorkerSide(QUIET_LOGGER, {
    databaseUrl: svc.database.url,
  });
  try {
    await waitFor(
      () => flaky.deliveries.length === 4,
      'the first, the second twice (500, then 200), the third',
    );
    const closing = worker.close();
    await locker.query('commit');
    await closing;
    const { rows } = await sql<{ status: string }>`select status from webhook_notifications
      where notification_id = any(${ids}::uuid[]) order by seq`.execute(db);
    assert.deepEqual(
      rows.map((r) => r.status),
      ['delivered', 'delivered', 'delivered'],
      'every result recorded before the stop ended',
    );
  } finally {
    await locker.end();
    await worker.close();
    await flaky.close();
  }
});
