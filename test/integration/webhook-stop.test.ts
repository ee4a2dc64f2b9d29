import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import { PgListener } from '../../src/store/pg-listener.ts';
import { inProcessDelivery, QUIET_LOGGER } from '../helpers/in-process-delivery.ts';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import { record, startWebhookReceiver, waitFor, type TestReceiver } from '../helpers/webhook-receiver.ts';

/**
 * A worker asked to stop claims nothing more and starts no attempt, even while its LISTEN connection has gone
 * silent (half-open: giving up the channel then waits for the listener's heartbeat timeout).
 */
let svc: TestService;
let proxy: TcpProxy;
let receiver: TestReceiver;
before(async () => {
  svc = await startTestService(); // role api: the worker below is the only one delivering
  proxy = await startTcpProxy(svc.database.url);
  receiver = await startWebhookReceiver();
});
after(async () => {
  await proxy?.close();
  await receiver?.close();
  await svc?.close();
});

/**
 * A listener whose giving up the channel fails, so that a worker side's stop fails at its last wait (the rejection
 * marked handled, as it is only awaited once the attempts under way have stopped).
 */
function listenerWhoseUnlistenFails(failure: Error): PgListener {
  return {
    listen: async () => {},
    unlisten: () => {
      const failed = Promise.reject(failure);
      failed.catch(() => {});
      return failed;
    },
  } as unknown as PgListener;
}

test('stopIntake with a silent LISTEN connection: nothing recorded after the stop is attempted', async () => {
  const listener = new PgListener(proxy.url);
  await listener.start();
  const db = svc.runtime.store.db;
  // Polling often: a dispatcher still running after the stop would find the late notification at once.
  const delivery = inProcessDelivery(svc, { pollIntervalMs: 20 });
  const worker = delivery.startWorkerSide(QUIET_LOGGER, { listener });
  try {
    const code = (await svc.newPlatform()).platform.platform_code;
    await svc.admin.put(`/platforms/${code}/webhook`, { url: receiver.url });
    const warm = await record(db, code, 'trade:STOP-WARM');
    await waitFor(() => receiver.deliveries.some((d) => d.notificationId === warm), 'a first delivery');
    proxy.freeze(); // the LISTEN connection goes silent
    const stopping = worker.stopIntake({ drainMs: 1_000 });
    const late = await record(db, code, 'trade:STOP-LATE');
    await stopping;
    assert.equal(receiver.deliveries.filter((d) => d.notificationId === late).length, 0);
    const rows = await db
      .selectFrom('webhook_notifications')
      .select(['status', 'attempt_count'])
      .where('notification_id', '=', late)
      .execute();
    assert.deepEqual(rows, [{ status: 'pending', attempt_count: 0 }]);
  } finally {
    proxy.thaw();
    await worker.close();
    await listener.stop();
  }
});

test('stopIntake whose last wait fails (here giving up the LISTEN channel) still gives every partition back', async () => {
  const db = svc.runtime.store.db;
  /** The partitions each owner holds, from the lease table. */
  const owners = async () =>
    (
      await sql<{ owner: string; n: number }>`select owner, count(*)::int as n from webhook_partitions
        where owner is not null group by owner`.execute(db)
    ).rows;
  // The wait at the stop fails: here its giving up the channel.
  const unlistenFailed = new Error('unlisten failed');
  const listener = listenerWhoseUnlistenFails(unlistenFailed);
  const worker = inProcessDelivery(svc).startWorkerSide(QUIET_LOGGER, { listener });
  let stopped = false;
  try {
    const held = await waitFor(async () => {
      const rows = await owners();
      return rows.length === 1 && rows[0]!.n === 64 ? rows[0] : null;
    }, 'the worker holding every partition');
    await assert.rejects(worker.stopIntake(), unlistenFailed, 'the failure reaches the caller');
    stopped = true;
    assert.deepEqual(
      await owners(),
      [],
      `given back despite the failure, not renewed by ${held.owner} until the process exits`,
    );
  } finally {
    if (!stopped) await worker.stopIntake().catch(() => {});
  }
});

test('close whose stop fails still closes the worker side’s own connections (its failure reaches the caller)', async () => {
  const db = svc.runtime.store.db;
  // The bookkeeping pool's connections, told apart by their application name.
  const url = new URL(svc.database.url);
  url.searchParams.set('application_name', 'svc-close-test');
  const connections = async () =>
    (
      await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity
        where application_name = 'svc-close-test'`.execute(db)
    ).rows[0]!.n;
  const unlistenFailed = new Error('unlisten failed');
  const listener = listenerWhoseUnlistenFails(unlistenFailed);
  const worker = inProcessDelivery(svc).startWorkerSide(QUIET_LOGGER, { databaseUrl: url.href, listener });
  await waitFor(async () => (await connections()) > 0, 'the bookkeeping pool at work (taking partitions)');
  await assert.rejects(worker.close(), unlistenFailed);
  // (A backend leaves pg_stat_activity a moment after its client has gone; an open pool's stay for 30 s idle.)
  await waitFor(
    async () => (await connections()) === 0,
    'the bookkeeping pool ended despite the failed stop',
    5_000,
  );
});
