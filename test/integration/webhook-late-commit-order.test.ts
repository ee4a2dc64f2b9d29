import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type pg from 'pg';
import { recordAnyNotification } from '../../src/domain/webhooks/outbox.ts';
import { PgListener } from '../../src/store/pg-listener.ts';
import { createTestPool, watchedDb } from '../helpers/database.ts';
import { inProcessDelivery, QUIET_LOGGER } from '../helpers/in-process-delivery.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import { heldAnswer, startWebhookReceiver, waitFor, type TestReceiver } from '../helpers/webhook-receiver.ts';

/**
 * wire-contract §5 "Order": a notification whose transaction commits after a later one of the same resource was
 * read (a late commit, which the reads find by its transaction id) goes first, also when that later one's lane is
 * already claimed and waits for a slot. Review: only the lanes being worked were told their order had changed; one
 * claimed and waiting kept the heads it was claimed with, and sent the later notification first.
 */
let svc: TestService;
let receiver: TestReceiver;
let pool: pg.Pool;
let listener: PgListener;
let worker: { close(): Promise<void> };
/** The notifications the worker's queries have brought back so far. */
const seen = new Set<string>();

before(async () => {
  // Role api: the worker below, with one slot, is the only one delivering.
  svc = await startTestService({ env: { SVC_WORKER_CONCURRENCY: '1' } });
  receiver = await startWebhookReceiver();
  pool = createTestPool({ connectionString: svc.database.url, max: 4 });
  const db = watchedDb(pool, (_text, result) => {
    for (const row of result.rows as Array<{ notification_id?: string | null }>)
      if (row.notification_id) seen.add(row.notification_id);
  });
  listener = new PgListener(svc.database.url);
  await listener.start();
  worker = inProcessDelivery(svc, { db }).startWorkerSide(QUIET_LOGGER, { listener });
});
after(async () => {
  await worker?.close();
  await listener?.stop();
  await pool?.end();
  await receiver?.close();
  await svc?.close();
});

test('an earlier notification committed late goes before a later one whose lane waits for a slot', async () => {
  const db = svc.runtime.store.db;
  const { platform } = await svc.newPlatform();
  const code = platform.platform_code;
  await svc.admin.put(`/platforms/${code}/webhook`, { url: receiver.url });
  const held = heldAnswer();
  const bodyOf = (raw: string) => JSON.parse(raw) as { key: string; n: number };
  receiver.setHandler((d) => (bodyOf(d.rawBody).key === 'X' ? held.answer : 200));
  const recording = (key: string, n: number) => ({
    platformCode: code,
    payloadType: 'trade_status_changed' as const,
    resourceKey: `trade:${key}`,
    payload: { key, n },
  });

  // R's first notification, in a transaction left open.
  let commitFirst!: () => void;
  const open = new Promise<void>((resolve) => (commitFirst = resolve));
  let first = '';
  const late = db.transaction().execute(async (trx) => {
    first = await recordAnyNotification(trx, recording('R', 1));
    await open;
  });
  await waitFor(() => first !== '', "R's first notification recorded, not committed");
  // X and R's second, committed together: read and claimed together; X takes the only slot, R waits for it.
  const [x, second] = await db
    .transaction()
    .execute(async (trx) => [
      await recordAnyNotification(trx, recording('X', 1)),
      await recordAnyNotification(trx, recording('R', 2)),
    ]);
  try {
    await waitFor(
      () => receiver.deliveries.some((d) => d.notificationId === x),
      'X under way in the only slot',
    );
    assert.ok(seen.has(second), "R's second was read with X");
    commitFirst();
    await late;
    await waitFor(() => seen.has(first), "R's first read, committed late");
  } finally {
    commitFirst();
    held.release(200);
  }
  const order = () =>
    receiver.deliveries
      .filter((d) => d.notificationId === first || d.notificationId === second)
      .map((d) => bodyOf(d.rawBody).n);
  await waitFor(() => order().length >= 2, "R's two delivered");
  assert.deepEqual(order(), [1, 2]);
});
