import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import {
  recordAnyNotification,
  recordNotification,
  type NotificationInput,
} from '../../src/domain/webhooks/outbox.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import { serviceEnv, startReadyWorker, stopWorkerProcess } from '../helpers/webhook-processes.ts';
import {
  notificationState,
  startWebhookReceiver,
  waitFor,
  type TestReceiver,
} from '../helpers/webhook-receiver.ts';

/**
 * Issue 4 point 1, the transactional outbox: a change and its notification commit or roll back together,
 * and a committed change ends in a delivery even when the process that made it dies right after the commit.
 */
let svc: TestService;
let receiver: TestReceiver;
before(async () => {
  svc = await startTestService();
  receiver = await startWebhookReceiver();
});
after(async () => {
  await receiver?.close();
  await svc?.close();
});

const db = () => svc.runtime.store.db;

async function platformWithWebhook() {
  const { platform } = await svc.newPlatform();
  await svc.admin.put(`/platforms/${platform.platform_code}/webhook`, {
    url: receiver.url,
    secret: 'outbox-secret',
  });
  return platform.platform_code;
}

/** What domain code records: a payload of its type's body (`WebhookPayloads`), checked when compiled. */
function rollbackNotice(platformCode: string): NotificationInput {
  return {
    platformCode,
    payloadType: 'participant_status_changed',
    resourceKey: 'participant:ROLLBK',
    payload: { participant_code: 'ROLLBK', participant_status: 'approved', timestamp: 0 },
  };
}
// A payload of another type's body does not compile (npm run check fails if it stops being an error).
// A whole participant body under the trade type: an error only while each type is tied to its own body (review:
// a body of no type at all was refused by looser typings too).
const mismatched: NotificationInput = {
  platformCode: 'P',
  payloadType: 'trade_status_changed',
  resourceKey: 'trade:T',
  // @ts-expect-error a participant's body under the trade type
  payload: { participant_code: 'P', participant_status: 'approved', timestamp: 0 },
};
void mismatched;

test('a rolled-back change leaves no notification and no delivery job', async () => {
  const code = await platformWithWebhook();
  const failure = new Error('the use case failed after recording its notification');
  await assert.rejects(
    db()
      .transaction()
      .execute(async (trx) => {
        await trx
          .updateTable('platforms')
          .set({ name: 'renamed in vain' })
          .where('platform_code', '=', code)
          .execute();
        await recordNotification(trx, rollbackNotice(code));
        throw failure;
      }),
    (e) => e === failure,
  );
  const platform = await db()
    .selectFrom('platforms')
    .select('name')
    .where('platform_code', '=', code)
    .executeTakeFirst();
  assert.notEqual(platform?.name, 'renamed in vain');
  const rows = await db()
    .selectFrom('webhook_notifications')
    .select('notification_id')
    .where('platform_code', '=', code)
    .execute();
  assert.deepEqual(rows, []);

  // The same use case committed does leave both (so the assertions above can fail).
  await db()
    .transaction()
    .execute(async (trx) => {
      await trx.updateTable('platforms').set({ name: 'renamed' }).where('platform_code', '=', code).execute();
      await recordNotification(trx, rollbackNotice(code));
    });
  const committed = await db()
    .selectFrom('webhook_notifications')
    .select('status')
    .where('platform_code', '=', code)
    .execute();
  assert.deepEqual(committed, [{ status: 'pending' }]);
});

test("a notification's created_at is when it was recorded, not when its transaction began", async () => {
  // The latency and oldest-pending metrics count from created_at ("since the commit"): a use case that works
  // for a while before it records its notification does not make the delivery look that much later.
  const code = await platformWithWebhook();
  let began = 0;
  await db()
    .transaction()
    .execute(async (trx) => {
      began = (await sql<{ at: Date }>`select now() as at`.execute(trx)).rows[0]!.at.getTime();
      await sql`select pg_sleep(0.3)`.execute(trx);
      await recordAnyNotification(trx, {
        platformCode: code,
        payloadType: 'participant_status_changed',
        resourceKey: 'participant:LATEOK',
        payload: { x: 1 },
      });
    });
  const row = await db()
    .selectFrom('webhook_notifications')
    .select('created_at')
    .where('platform_code', '=', code)
    .executeTakeFirstOrThrow();
  assert.ok(row.created_at.getTime() - began >= 300, `${row.created_at.toISOString()} vs ${began}`);
});

test('a change committed by a process SIGKILLed right after the commit is still delivered', async () => {
  const code = await platformWithWebhook();
  const fixture = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      path.join(import.meta.dirname, 'webhook-commit-then-die.fixture.ts'),
      code,
      'renamed then killed',
      'participant:KILLED',
    ],
    { env: serviceEnv(svc), stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let stdout = '';
  fixture.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
  const signal = await new Promise<NodeJS.Signals | null>((resolve) =>
    fixture.on('exit', (_code, s) => resolve(s)),
  );
  assert.equal(signal, 'SIGKILL');
  const id = stdout.trim();
  assert.match(id, /^[0-9a-f-]{36}$/);
  // Committed: the change and its notification are there, and nothing was delivered by the dead process.
  const platform = await db()
    .selectFrom('platforms')
    .select('name')
    .where('platform_code', '=', code)
    .executeTakeFirst();
  assert.equal(platform?.name, 'renamed then killed');
  assert.equal((await notificationState(db(), id))?.status, 'pending');
  assert.equal(receiver.deliveries.filter((d) => d.notificationId === id).length, 0);

  // Any worker started later delivers it.
  const worker = await startReadyWorker(serviceEnv(svc));
  try {
    const delivery = await waitFor(
      () => receiver.deliveries.find((d) => d.notificationId === id),
      'the delivery by a worker started after the crash',
      60_000,
    );
    assert.deepEqual(JSON.parse(delivery.rawBody), { platform_name: 'renamed then killed' });
    await waitFor(async () => (await notificationState(db(), id))?.status === 'delivered', 'delivered state');
  } finally {
    await stopWorkerProcess(worker);
  }
});
