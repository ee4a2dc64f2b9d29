import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { parseCronItems } from 'graphile-worker';
import { sql } from 'kysely';
import { loadConfig } from '../../src/config.ts';
import { PURGE_NOTIFICATIONS_TASK } from '../../src/domain/webhooks/webhooks.service.ts';
import { buildTaskList, cronItems } from '../../src/jobs/task-list.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import { record } from '../helpers/webhook-receiver.ts';

/**
 * Delivered and skipped notifications are purged SVC_WEBHOOK_RETENTION_DAYS (30) after they were recorded,
 * by an hourly job; dead and undelivered ones stay (wire-contract §5: dead letters are kept and
 * redeliverable). Every change of every resource records one: without the purge the outbox only grows.
 */
let svc: TestService;
let code: string;
const db = () => svc.runtime.store.db;
const webhooks = () => svc.runtime.services.webhooks;

before(async () => {
  svc = await startTestService();
  code = (await svc.newPlatform()).platform.platform_code;
});
after(() => svc?.close());

/** A notification of `code` in `status`, recorded `daysAgo` days ago (and skipped then, if skipped). */
async function notification(status: string, daysAgo: number): Promise<string> {
  const id = await record(db(), code, `trade:${status}-${daysAgo}-${Math.random()}`);
  await sql`update webhook_notifications
    set status = ${status}, created_at = now() - ${daysAgo} * interval '1 day',
      skipped_at = case when ${status} = 'skipped' then now() - ${daysAgo} * interval '1 day' end
    where notification_id = ${id}::uuid`.execute(db());
  return id;
}

async function ids(): Promise<Set<string>> {
  const rows = await db()
    .selectFrom('webhook_notifications')
    .select('notification_id')
    .where('platform_code', '=', code)
    .execute();
  return new Set(rows.map((r) => r.notification_id));
}

test('delivered and skipped notifications older than 30 days are purged with their attempts; the rest stay', async () => {
  // Recorded oldest first, as notifications are.
  const dead = await notification('dead', 60);
  const delivered = await notification('delivered', 45);
  const pending = await notification('pending', 40);
  const retrying = await notification('retrying', 35);
  const skipped = await notification('skipped', 31);
  const purgeable = [delivered, skipped];
  const kept = [
    dead,
    pending,
    retrying,
    await notification('delivered', 29),
    await notification('skipped', 1),
  ];
  // An attempt kept, as before migration 0011, in a table of its own that references the notification.
  await sql`insert into webhook_attempts_before_0011
      (notification_id, attempt_number, started_at, duration_ms, status_code, outcome, worker)
    values (${purgeable[0]}::uuid, 1, now() - interval '45 days', 12, 204, 'delivered', 'w1')`.execute(db());

  assert.equal(await webhooks().purgeFinished(), 2);
  assert.deepEqual(await ids(), new Set(kept));
  const attempts = await sql<{ n: string }>`
    select count(*) as n from webhook_attempts where notification_id = ${purgeable[0]}::uuid`.execute(db());
  assert.equal(Number(attempts.rows[0]!.n), 0);
  // The dead letter is still listed and redeliverable.
  const listed = await svc.admin.get<Array<{ notification_id: string }>>(
    `/platforms/${code}/notifications?status=dead`,
  );
  assert.deepEqual(
    listed.map((n) => n.notification_id),
    [dead],
  );
  assert.equal(await webhooks().purgeFinished(), 0);
});

test('a purge goes through as many batches as it takes, and stops at the first notification still retained', async () => {
  // An outbox of these alone (the purge walks every platform's notifications in the order recorded).
  await sql`delete from webhook_notifications`.execute(db());
  const old = [];
  for (let i = 0; i < 7; i++) old.push(await notification('delivered', 40));
  const recent = await notification('delivered', 2);
  // Recorded after the recent one: left for a later run, since the purge stops where retention begins.
  const behind = await notification('delivered', 40);

  assert.equal(await webhooks().purgeFinished({ batch: 2 }), 7);
  const left = await ids();
  for (const id of old) assert.equal(left.has(id), false, id);
  assert.ok(left.has(recent) && left.has(behind));
});

test('a purge asked to stop (the worker is stopping) ends after the batch under way; the next run goes on', async () => {
  await sql`delete from webhook_notifications`.execute(db());
  for (let i = 0; i < 5; i++) await notification('delivered', 40);
  const stopping = new AbortController();
  stopping.abort();
  assert.equal(await webhooks().purgeFinished({ batch: 2, signal: stopping.signal }), 2);
  assert.equal((await ids()).size, 3);
  assert.equal(await webhooks().purgeFinished({ batch: 2 }), 3);
});

test('an old notification redelivered and delivered again is kept for the retention after that delivery', async () => {
  await sql`delete from webhook_notifications`.execute(db());
  const redelivered = await notification('delivered', 40);
  await sql`update webhook_notifications set delivered_at = now() - interval '1 day'
    where notification_id = ${redelivered}::uuid`.execute(db());
  // Redelivered yesterday and skipped then (its webhook no longer wanted it): kept too.
  const skippedAgain = await notification('skipped', 40);
  await sql`update webhook_notifications set redelivered_at = now() - interval '1 day'
    where notification_id = ${skippedAgain}::uuid`.execute(db());
  const old = await notification('delivered', 40);
  assert.equal(await webhooks().purgeFinished(), 1);
  const left = await ids();
  assert.ok(left.has(redelivered) && left.has(skippedAgain) && !left.has(old));
});

test('SVC_WEBHOOK_RETENTION_DAYS: 30 by default, 0 keeps notifications for ever, anything else is refused', () => {
  const DAY = 24 * 60 * 60_000;
  assert.equal(loadConfig({}).webhooks.retentionMs, 30 * DAY);
  assert.equal(loadConfig({ SVC_WEBHOOK_RETENTION_DAYS: '7' }).webhooks.retentionMs, 7 * DAY);
  assert.equal(loadConfig({ SVC_WEBHOOK_RETENTION_DAYS: '0' }).webhooks.retentionMs, null);
  for (const bad of ['-1', '1.5', 'ever'])
    assert.throws(() => loadConfig({ SVC_WEBHOOK_RETENTION_DAYS: bad }), /^.*SVC_WEBHOOK_RETENTION_DAYS/);
});

test('with retention off nothing is purged', async () => {
  const keeper = await startTestService({ env: { SVC_WEBHOOK_RETENTION_DAYS: '0' } });
  try {
    const platform = (await keeper.newPlatform()).platform.platform_code;
    const id = await record(keeper.runtime.store.db, platform, 'trade:KEEP');
    await sql`update webhook_notifications set status = 'delivered', created_at = now() - interval '10 years'
      where notification_id = ${id}::uuid`.execute(keeper.runtime.store.db);
    assert.equal(await keeper.runtime.services.webhooks.purgeFinished(), 0);
    const left = await sql`select 1 from webhook_notifications where notification_id = ${id}::uuid`.execute(
      keeper.runtime.store.db,
    );
    assert.equal(left.rows.length, 1);
  } finally {
    await keeper.close();
  }
});

test('the purge is an hourly cron item of the worker, run serially, and its task is in the task list', () => {
  const item = cronItems.find((c) => c.task === PURGE_NOTIFICATIONS_TASK);
  assert.ok(item, 'no cron item for the purge');
  assert.equal(item.match, '41 * * * *');
  // In a queue of its own: a run that outlasts the hour is not joined by the next one.
  assert.equal(item.options?.queueName, PURGE_NOTIFICATIONS_TASK);
  assert.equal(parseCronItems(cronItems).length, cronItems.length);
  const tasks = buildTaskList(svc.runtime.services);
  assert.equal(typeof tasks[PURGE_NOTIFICATIONS_TASK], 'function');
});
