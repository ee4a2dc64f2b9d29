import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type pg from 'pg';
import { PgListener } from '../../src/store/pg-listener.ts';
import { createTestPool, watchedDb } from '../helpers/database.ts';
import { inProcessDelivery } from '../helpers/in-process-delivery.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import { record, startWebhookReceiver, waitFor, type TestReceiver } from '../helpers/webhook-receiver.ts';

/**
 * An operator's change (another URL, a redelivery) whose NOTIFY arrives while a worker's read of new notifications
 * is still on its way: what that read brings was read before the change. The platform's lanes are not claimed until
 * a read begun after the change has landed (with its endpoint read again), so nothing is sent with the old URL or
 * ahead of a redelivered earlier notification (wire-contract §5 "Order"). The read's answer is held here until the
 * worker has seen the NOTIFY, which makes the window certain.
 */
let svc: TestService;
let oldReceiver: TestReceiver;
let newReceiver: TestReceiver;
let pool: pg.Pool;
let listener: PgListener;
let worker: { close(): Promise<void> };
const refreshed: string[] = [];
/** While set, a read that found notifications answers only once it resolves (and `reading` is called). */
let held: Promise<void> | null = null;
let reading: (() => void) | null = null;

before(async () => {
  svc = await startTestService(); // role api: the worker below is the only one delivering
  oldReceiver = await startWebhookReceiver();
  newReceiver = await startWebhookReceiver();
  pool = createTestPool({ connectionString: svc.database.url, max: 4 });
  // The pool as Kysely sees it, with a read's answer held back while `held` is set.
  const db = watchedDb(pool, async (text, result) => {
    const found = result.rows.some((row: { notification_id?: string | null }) => row.notification_id);
    // A read of notifications: a partition's load, or the read after the cursor (migration 0032's function).
    if (held && /pg_current_snapshot|webhook_read_after/.test(text) && found) {
      reading?.();
      await held;
    }
  });
  listener = new PgListener(svc.database.url);
  await listener.start();
  const delivery = inProcessDelivery(svc, { db });
  const logger = {
    info: (obj: object) => {
      const code = (obj as { platformCode?: string }).platformCode;
      if (code) refreshed.push(code);
    },
    warn: () => {},
    error: () => {},
  };
  worker = delivery.startWorkerSide(logger, { listener });
});
after(async () => {
  await worker?.close();
  await listener?.stop();
  await pool?.end();
  await oldReceiver?.close();
  await newReceiver?.close();
  await svc?.close();
});

const db = () => svc.runtime.store.db;
/** How many operator changes of the platform the worker has acted on. */
const refreshesOf = (code: string) => refreshed.filter((c) => c === code).length;

/** Holds the next reads' answers; returns a promise of the first held, and what lets them go. */
function holdReads(): { read: Promise<void>; release: () => void } {
  let release!: () => void;
  held = new Promise<void>((resolve) => (release = resolve));
  const read = new Promise<void>((resolve) => (reading = resolve));
  return {
    read,
    release: () => {
      held = null;
      reading = null;
      release();
    },
  };
}

test('a URL changed while a read is on its way: the delivery goes to the new URL only', async () => {
  const { platform } = await svc.newPlatform();
  const code = platform.platform_code;
  await svc.admin.put(`/platforms/${code}/webhook`, { url: oldReceiver.url, secret: 'old-secret-0123' });
  // A first delivery, so that the worker holds the platform's endpoint as it was.
  const before = await record(db(), code, 'trade:RACE-URL-0');
  await waitFor(() => oldReceiver.deliveries.some((d) => d.notificationId === before), 'the first delivery');
  const hold = holdReads();
  try {
    const id = await record(db(), code, 'trade:RACE-URL');
    await hold.read;
    const seen = refreshesOf(code);
    await svc.admin.put(`/platforms/${code}/webhook`, { url: newReceiver.url, secret: 'new-secret-4567' });
    await waitFor(() => refreshesOf(code) > seen, 'the worker seeing the change');
    hold.release();
    const to = (receiver: TestReceiver) => receiver.deliveries.filter((d) => d.notificationId === id).length;
    await waitFor(() => to(newReceiver) + to(oldReceiver) > 0, 'the delivery');
    assert.deepEqual({ old: to(oldReceiver), new: to(newReceiver) }, { old: 0, new: 1 });
  } finally {
    hold.release();
  }
});

test('an earlier notification redelivered while the read of a later one is on its way goes before it', async () => {
  const { platform } = await svc.newPlatform();
  const code = platform.platform_code;
  await svc.admin.put(`/platforms/${code}/webhook`, { url: newReceiver.url });
  const arrivals = () =>
    newReceiver.deliveries
      .filter((d) => d.notificationId === first || d.notificationId === second)
      .map((d) => (d.notificationId === first ? 'first' : 'second'));
  const first = await record(db(), code, 'trade:RACE-ORDER', { n: 1 });
  let second = '';
  await waitFor(() => arrivals().length === 1, 'the first delivered');
  const hold = holdReads();
  try {
    second = await record(db(), code, 'trade:RACE-ORDER', { n: 2 });
    await hold.read;
    const seen = refreshesOf(code);
    await svc.admin.post(`/notifications/${first}/redeliver`);
    await waitFor(() => refreshesOf(code) > seen, 'the worker seeing the redelivery');
    hold.release();
    await waitFor(() => arrivals().length === 3, 'the redelivery and the second');
    assert.deepEqual(arrivals(), ['first', 'first', 'second']);
  } finally {
    hold.release();
  }
});
