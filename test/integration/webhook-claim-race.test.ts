import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Kysely, PostgresDialect, sql, type PostgresPool } from 'kysely';
import pg from 'pg';
import { recordNotification } from '../../src/domain/webhooks/outbox.ts';
import type { Db } from '../../src/store/database.ts';
import { PgListener } from '../../src/store/pg-listener.ts';
import { inProcessDelivery } from '../helpers/in-process-delivery.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import { record, startWebhookReceiver, waitFor, type TestReceiver } from '../helpers/webhook-receiver.ts';

/**
 * An operator's change (another URL, a redelivery) whose NOTIFY arrives while a claim's answer is still on
 * its way: the claimed lanes were read before the change, and are neither being worked nor ready, so the
 * refresh of the lanes in hand does not reach them. They must be given back and read afresh, not worked
 * with the old URL or ahead of a redelivered earlier notification (wire-contract §5 "Order"). The claim's
 * answer is held here until the dispatcher has seen the NOTIFY, which makes the window certain.
 */
let svc: TestService;
let oldReceiver: TestReceiver;
let newReceiver: TestReceiver;
let pool: pg.Pool;
let listener: PgListener;
let worker: { close(): Promise<void> };
const refreshed: string[] = [];
/** While set, a claim that found lanes answers only once it resolves. */
let held: Promise<void> | null = null;
/** While set, a release of claimed lanes answers only once it resolves (and `releasing` is called). */
let heldRelease: Promise<void> | null = null;
let releasing: (() => void) | null = null;

before(async () => {
  svc = await startTestService(); // role api: the dispatcher below is the only one delivering
  oldReceiver = await startWebhookReceiver();
  newReceiver = await startWebhookReceiver();
  pool = new pg.Pool({ connectionString: svc.database.url, max: 4 });
  // The pool as Kysely sees it, with the claim's answer held back while `held` is set.
  const holding: PostgresPool = {
    connect: async () => {
      const client = await pool.connect();
      const query = client.query.bind(client) as (text: string, values: unknown[]) => Promise<pg.QueryResult>;
      return Object.assign(client, {
        query: async (text: string, values: unknown[]) => {
          const result = await query(text, values);
          if (held && text.includes('webhook_claim_lanes') && result.rows.length > 0) await held;
          if (heldRelease && text.includes('webhook_release_lanes')) {
            releasing?.();
            await heldRelease;
          }
          return result;
        },
      });
    },
    end: () => pool.end(),
  };
  const db = new Kysely({ dialect: new PostgresDialect({ pool: holding }) }) as unknown as Db;
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
/** How many operator changes of the platform the dispatcher has acted on. */
const refreshesOf = (code: string) => refreshed.filter((c) => c === code).length;

/** Holds the next claims' answers; returns what lets them go. */
function holdClaims(): () => void {
  let release!: () => void;
  held = new Promise<void>((resolve) => (release = resolve));
  return () => {
    held = null;
    release();
  };
}

async function laneClaimed(code: string): Promise<boolean> {
  const lanes = await sql<{ owner: string | null }>`
    select owner from webhook_lanes where platform_code = ${code}`.execute(db());
  return lanes.rows[0]?.owner != null;
}

test('a URL changed while a claim is on its way: the delivery goes to the new URL only', async () => {
  const { platform } = await svc.newPlatform();
  const code = platform.platform_code;
  await svc.admin.put(`/platforms/${code}/webhook`, { url: oldReceiver.url, secret: 'old-secret-0123' });
  const release = holdClaims();
  try {
    const id = await record(db(), code, 'trade:RACE-URL');
    await waitFor(() => laneClaimed(code), 'the claim, answer held');
    const seen = refreshesOf(code);
    await svc.admin.put(`/platforms/${code}/webhook`, { url: newReceiver.url, secret: 'new-secret-4567' });
    await waitFor(() => refreshesOf(code) > seen, 'the dispatcher seeing the change');
    release();
    const to = (receiver: TestReceiver) => receiver.deliveries.filter((d) => d.notificationId === id).length;
    await waitFor(() => to(newReceiver) + to(oldReceiver) > 0, 'the delivery');
    assert.deepEqual({ old: to(oldReceiver), new: to(newReceiver) }, { old: 0, new: 1 });
  } finally {
    release();
  }
});

test('an earlier notification redelivered while a claim of its lane is on its way goes before the later one', async () => {
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
  await waitFor(async () => !(await laneClaimed(code)), 'the lane given back');
  const release = holdClaims();
  try {
    second = await record(db(), code, 'trade:RACE-ORDER', { n: 2 });
    await waitFor(() => laneClaimed(code), 'the claim of the second, answer held');
    const seen = refreshesOf(code);
    await svc.admin.post(`/notifications/${first}/redeliver`);
    await waitFor(() => refreshesOf(code) > seen, 'the dispatcher seeing the redelivery');
    release();
    await waitFor(() => arrivals().length === 3, 'the redelivery and the second');
    assert.deepEqual(arrivals(), ['first', 'first', 'second']);
  } finally {
    release();
  }
});

test('a second platform changed while the stale lanes of a claim are being given back: its lane is read afresh too', async () => {
  const [a, b] = [
    (await svc.newPlatform()).platform.platform_code,
    (await svc.newPlatform()).platform.platform_code,
  ];
  for (const code of [a, b])
    await svc.admin.put(`/platforms/${code}/webhook`, { url: oldReceiver.url, secret: 'old-secret-0123' });
  const releaseClaim = holdClaims();
  let letReleaseGo!: () => void;
  heldRelease = new Promise<void>((resolve) => (letReleaseGo = resolve));
  const releaseReached = new Promise<void>((resolve) => (releasing = resolve));
  try {
    // One transaction, one NOTIFY: both lanes come in the same claim.
    const ids = await db()
      .transaction()
      .execute(async (trx) => [
        await recordNotification(trx, {
          platformCode: a,
          payloadType: 'trade_status_changed',
          resourceKey: 'trade:RACE-A',
          payload: { n: 1 },
        }),
        await recordNotification(trx, {
          platformCode: b,
          payloadType: 'trade_status_changed',
          resourceKey: 'trade:RACE-B',
          payload: { n: 1 },
        }),
      ]);
    await waitFor(
      async () => (await laneClaimed(a)) && (await laneClaimed(b)),
      'one claim of both, answer held',
    );
    // A changes while the claim is on its way: its lane is stale and given back (that release is held) ...
    const seenA = refreshesOf(a);
    await svc.admin.put(`/platforms/${a}/webhook`, { url: newReceiver.url, secret: 'new-secret-4567' });
    await waitFor(() => refreshesOf(a) > seenA, 'the dispatcher seeing the change of A');
    releaseClaim();
    await releaseReached;
    // ... and B changes while it is being given back.
    const seenB = refreshesOf(b);
    await svc.admin.put(`/platforms/${b}/webhook`, { url: newReceiver.url, secret: 'new-secret-4567' });
    await waitFor(() => refreshesOf(b) > seenB, 'the dispatcher seeing the change of B');
    heldRelease = null;
    letReleaseGo();
    const to = (receiver: TestReceiver, id: string) =>
      receiver.deliveries.filter((d) => d.notificationId === id).length;
    for (const id of ids) {
      await waitFor(() => to(newReceiver, id) + to(oldReceiver, id) > 0, 'the delivery');
      assert.deepEqual({ old: to(oldReceiver, id), new: to(newReceiver, id) }, { old: 0, new: 1 });
    }
  } finally {
    heldRelease = null;
    letReleaseGo();
    releaseClaim();
  }
});
