import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import { capturedLogger } from '../helpers/captured-log.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import {
  heldAnswer,
  notificationState,
  record,
  startWebhookReceiver,
  waitFor,
  type TestReceiver,
} from '../helpers/webhook-receiver.ts';

/**
 * wire-contract §5 (at least once, never dropped; per-resource order) across a lost lease: an attempt whose record
 * lands after the partition's lease went to another holder moves nothing on, and the notification must be
 * attempted again by whoever holds the partition next. With one worker that is the same worker, which read it back
 * with the token its own book had retired as "moved on", dropped it as a stale read, and left it pending for good
 * while the resource's later notifications went ahead (review).
 */
let svc: TestService;
const { logger, lines: logLines } = capturedLogger('warn');
let receiver: TestReceiver;
const firstAnswer = heldAnswer();

before(async () => {
  svc = await startTestService({
    logger: logger,
    env: {
      SVC_ROLE: 'all',
      SVC_WEBHOOK_FAST_RETRY_DELAY_MS: '20',
      SVC_WEBHOOK_RETRY_SCHEDULE: '200ms,200ms',
      SVC_WEBHOOK_TIMEOUT_MS: '5000',
    },
  });
  let first = true;
  receiver = await startWebhookReceiver(() => {
    if (first) {
      first = false;
      return firstAnswer.answer;
    }
    return 200;
  });
});
after(async () => {
  firstAnswer.release(500);
  await receiver?.close();
  await svc?.close();
});

test('a notification whose attempt was recorded after the lease was lost is attempted again, before its resource’s next', async () => {
  const db = svc.runtime.store.db;
  const code = (await svc.newPlatform()).platform.platform_code;
  await svc.admin.put(`/platforms/${code}/webhook`, { url: receiver.url });
  const first = await record(db, code, 'trade:LEASE', { e: 1 });
  await waitFor(() => receiver.deliveries.length === 1, 'the first attempt under way');
  // Another holder takes the partition (as after a stall longer than the lease)...
  const partition = sql`(select lane_partition from webhook_notifications where notification_id = ${first}::uuid)`;
  await sql`update webhook_partitions set owner = 'another-worker', lease_until = now() + interval '1 hour'
            where lane_partition = ${partition}`.execute(db);
  // ...before the attempt's answer, a 500: its record lands without the lease and moves nothing on (the case
  // of the review). On a busy machine the worker's renewal may see the loss first, and not record it at all:
  // either way the notification is the partition's next holder's.
  firstAnswer.release(500);
  await waitFor(
    async () =>
      (
        await sql<{ n: number }>`select count(*)::int as n from webhook_attempts
                                 where notification_id = ${first}::uuid`.execute(db)
      ).rows[0]!.n === 1 || logLines.some((l) => l.includes('webhook partition leases lost')),
    'the attempt recorded, or the loss seen',
  );
  assert.equal((await notificationState(db, first))?.status, 'pending', 'moved nothing on');
  // The other holder is gone: its lease runs out, and this worker, the only one, takes the partition back.
  await sql`update webhook_partitions set lease_until = now() - interval '1 second'
            where lane_partition = ${partition}`.execute(db);
  const second = await record(db, code, 'trade:LEASE', { e: 2 });
  await waitFor(
    async () => (await notificationState(db, second))?.status === 'delivered',
    'the second notification delivered',
    30_000,
  );
  assert.equal((await notificationState(db, first))?.status, 'delivered');
  // At least once: the first again (on a busy machine perhaps twice, a duplicate the contract allows), and all
  // of its attempts before the second's.
  const events = receiver.deliveries.map((d) => (JSON.parse(d.rawBody) as { e: number }).e);
  assert.ok(events.filter((e) => e === 1).length >= 2, `the first attempted again: ${events.join(',')}`);
  assert.ok(events.lastIndexOf(1) < events.indexOf(2), `the first before the second: ${events.join(',')}`);
});
