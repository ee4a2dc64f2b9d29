import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import { capturedLogger } from '../helpers/captured-log.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import {
  notificationState,
  record,
  startWebhookReceiver,
  waitFor,
  type TestReceiver,
} from '../helpers/webhook-receiver.ts';

/**
 * Attempts made whose records cannot be written (the database away, its connection reset): the worker lets go of
 * the lane's partition, as for a lost lease, and takes it again once the database answers. Left in the book, the
 * lane was due again at once and attempted every few milliseconds until the lease ran short: 70 requests in 1.8 s
 * to one receiver, 2xx answers sent again (review). Here the records fail because their function is renamed away.
 */
let svc: TestService;
let receiver: TestReceiver;
const { logger, lines: logLines } = capturedLogger('error');

before(async () => {
  svc = await startTestService({ logger: logger, env: { SVC_ROLE: 'all' } });
  receiver = await startWebhookReceiver(() => 200);
});
after(async () => {
  await receiver?.close();
  await svc?.close();
});

test('attempts whose records fail are not made again every few ms: the partition is let go until the database answers', async () => {
  const db = svc.runtime.store.db;
  const code = (await svc.newPlatform()).platform.platform_code;
  await svc.admin.put(`/platforms/${code}/webhook`, { url: receiver.url });
  await sql`alter function webhook_record_attempts(text, jsonb) rename to webhook_record_attempts_away`.execute(
    db,
  );
  let restored = false;
  const restore = async () => {
    if (restored) return;
    restored = true;
    await sql`alter function webhook_record_attempts_away(text, jsonb) rename to webhook_record_attempts`.execute(
      db,
    );
  };
  try {
    const id = await record(db, code, 'trade:RECORDS', { e: 1 });
    await waitFor(() => receiver.deliveries.length >= 1, 'the first attempt');
    await waitFor(
      () => logLines.some((l) => l.includes('webhook attempts could not be recorded')),
      'the failure',
    );
    await sleep(2_000);
    // The partition is taken again at a lease renewal (every second), read afresh, and its lane attempted once
    // more each time: a few attempts in these 2 s, not one every records' gap (25 ms).
    const attempts = receiver.deliveries.filter((d) => d.notificationId === id).length;
    assert.ok(
      attempts <= 6,
      `${attempts} attempts of one notification in about 2 s while its records failed`,
    );
    await restore();
    await waitFor(
      async () => (await notificationState(db, id))?.status === 'delivered',
      'delivered once recorded',
    );
  } finally {
    await restore();
  }
});
