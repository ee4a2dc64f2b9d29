import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import { recordAnyNotification } from '../../src/domain/webhooks/outbox.ts';
import {
  loadPartitions,
  readAfter,
  readLanes,
  type ReadCursor,
} from '../../src/domain/webhooks/lane-reads.repository.ts';
import { redeliverOne } from '../../src/domain/webhooks/webhooks.repository.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import { record } from '../helpers/webhook-receiver.ts';

/**
 * The reads of the delivery redesign on their own (no worker runs here): a partition's backlog, what was recorded
 * after a cursor, a committed-late notification found below it, a redelivery, and a lane's next part.
 */
let svc: TestService;
before(async () => {
  svc = await startTestService();
});
after(() => svc?.close());

const db = () => svc.runtime.store.db;

async function newPlatformWithWebhook(): Promise<string> {
  const { platform } = await svc.newPlatform();
  await svc.admin.put(`/platforms/${platform.platform_code}/webhook`, { url: 'http://127.0.0.1:9/unused' });
  return platform.platform_code;
}

async function partitionOf(code: string, resource: string): Promise<number> {
  const { rows } = await sql<{
    p: number;
  }>`select webhook_lane_partition(${code}, ${resource})::int as p`.execute(db());
  return rows[0]!.p;
}

/** Two resources of `code` whose lanes fall in different partitions. */
async function twoPartitions(code: string): Promise<{ a: string; b: string; pa: number; pb: number }> {
  const a = 'trade:A';
  const pa = await partitionOf(code, a);
  for (let i = 0; ; i++) {
    const b = `trade:B${i}`;
    const pb = await partitionOf(code, b);
    if (pb !== pa) return { a, b, pa, pb };
  }
}

/** A cursor past everything recorded so far, as a worker's first load leaves it. */
async function cursorNow(partitions: number[]): Promise<ReadCursor> {
  return (await loadPartitions(db(), partitions, 1)).cursor;
}

test("a partition's load brings its undelivered notifications, up to perLane of each lane, in seq order", async () => {
  const code = await newPlatformWithWebhook();
  const { a, b, pa } = await twoPartitions(code);
  const a1 = await record(db(), code, a);
  await record(db(), code, b);
  const a2 = await record(db(), code, a);
  const a3 = await record(db(), code, a);
  const loaded = await loadPartitions(db(), [pa], 2);
  const mine = loaded.rows.filter((r) => r.platform_code === code);
  assert.deepEqual(
    mine.map((r) => r.notification_id),
    [a1, a2],
  );
  assert.equal(mine[0]!.lane_partition, pa);
  assert.equal(mine[0]!.wait_ms, 0);
  assert.ok(mine[0]!.seq < mine[1]!.seq);
  const { rows } = await sql<{
    seq: number;
  }>`select max(seq)::float8 as seq from webhook_notifications`.execute(db());
  assert.equal(loaded.cursor.afterSeq, rows[0]!.seq, 'the cursor starts after the last recorded');
  assert.ok(!loaded.rows.some((r) => r.notification_id === a3), 'past perLane: left for a refill');
});

test('a read after the cursor takes what was recorded since, in its partitions only, a limit at a time', async () => {
  const code = await newPlatformWithWebhook();
  const { a, b, pa } = await twoPartitions(code);
  let cursor = await cursorNow([pa]);
  const recorded = [];
  for (let i = 0; i < 5; i++) recorded.push(await record(db(), code, a, { i }));
  await record(db(), code, b);
  const seen: string[] = [];
  for (let reads = 0; reads < 4; reads++) {
    const read = await readAfter(db(), [pa], cursor, 2);
    assert.ok(read.rows.length <= 2);
    seen.push(...read.rows.filter((r) => r.platform_code === code).map((r) => r.notification_id));
    cursor = read.cursor;
  }
  assert.deepEqual(seen, recorded, 'each once, in order, and not the other partition');
});

test('a read that finds less than its limit moves the cursor past the other partitions too; it brings the columns a load brings', async () => {
  const code = await newPlatformWithWebhook();
  const { a, b, pa } = await twoPartitions(code);
  const cursor = await cursorNow([pa]);
  const mine = await record(db(), code, a);
  const theirs = await record(db(), code, b);
  const read = await readAfter(db(), [pa], cursor, 10);
  assert.deepEqual(
    read.rows.filter((r) => r.platform_code === code).map((r) => r.notification_id),
    [mine],
  );
  // Past the other partition's notification too (the highest seq the read's snapshot showed): the next read does not
  // walk over it again.
  const { rows } = await sql<{ seq: number }>`select seq::float8 as seq from webhook_notifications
    where notification_id = ${theirs}`.execute(db());
  assert.ok(read.cursor.afterSeq >= rows[0]!.seq, `cursor ${read.cursor.afterSeq} past ${rows[0]!.seq}`);
  // The same fields as a partition's load (migration 0032's function writes them out again).
  const loaded = await loadPartitions(db(), [pa], 1);
  const loadedRow = loaded.rows.find((r) => r.notification_id === mine)!;
  assert.deepEqual(
    Object.keys(read.rows.find((r) => r.notification_id === mine)!).sort(),
    Object.keys(loadedRow).sort(),
  );
});

test('a notification whose transaction commits after a later one was read is found below the cursor', async () => {
  const code = await newPlatformWithWebhook();
  // Two lanes: a notification recorded in a lane waits for an open transaction recording in the same one.
  const p = [await partitionOf(code, 'trade:L'), await partitionOf(code, 'trade:K')];
  let cursor = await cursorNow(p);
  let commit!: () => void;
  const gate = new Promise<void>((resolve) => (commit = resolve));
  let recorded!: () => void;
  const inserted = new Promise<void>((resolve) => (recorded = resolve));
  // The early one: its seq is drawn now, its commit waits.
  const early = db()
    .transaction()
    .execute(async (trx) => {
      const id = await recordAnyNotification(trx, {
        platformCode: code,
        payloadType: 'trade_status_changed',
        resourceKey: 'trade:L',
        payload: { early: true },
      });
      recorded();
      await gate;
      return id;
    });
  await inserted;
  const later = await record(db(), code, 'trade:K', { later: true });
  const first = await readAfter(db(), p, cursor, 100);
  assert.deepEqual(
    first.rows.filter((r) => r.platform_code === code).map((r) => r.notification_id),
    [later],
  );
  cursor = first.cursor;
  commit();
  const earlyId = await early;
  const second = await readAfter(db(), p, cursor, 100);
  const found = second.rows.filter((r) => r.platform_code === code);
  assert.deepEqual(
    found.map((r) => r.notification_id),
    [earlyId],
  );
  assert.ok(found[0]!.seq < cursor.afterSeq, 'below the cursor: found by its transaction');
  const third = await readAfter(db(), p, second.cursor, 100);
  assert.deepEqual(
    third.rows.filter((r) => r.platform_code === code),
    [],
    'and once',
  );
});

test("an operator's redelivery makes a delivered notification new to the reads, with a new state token", async () => {
  const code = await newPlatformWithWebhook();
  const p = await partitionOf(code, 'trade:R');
  const id = await record(db(), code, 'trade:R');
  const before = await loadPartitions(db(), [p], 10);
  const token = before.rows.find((r) => r.notification_id === id)!.state_token;
  await sql`update webhook_notifications set status = 'delivered', delivered_at = now() where notification_id = ${id}::uuid`.execute(
    db(),
  );
  const cursor = (await readAfter(db(), [p], before.cursor, 100)).cursor;
  assert.equal(await redeliverOne(db(), code, id), 1);
  const read = await readAfter(db(), [p], cursor, 100);
  const again = read.rows.find((r) => r.notification_id === id);
  assert.ok(again, 'found again');
  assert.notEqual(again.state_token, token);
});

test("a lane's next part: after a seq, up to perLane, and whether that is all", async () => {
  const code = await newPlatformWithWebhook();
  const ids = [];
  for (let i = 0; i < 5; i++) ids.push(await record(db(), code, 'trade:N', { i }));
  const other = await record(db(), code, 'trade:M');
  const loaded = await loadPartitions(db(), [await partitionOf(code, 'trade:N')], 2);
  const held = loaded.rows.filter((r) => r.resource_key === 'trade:N' && r.platform_code === code);
  const lane = { platformCode: code, resourceKey: 'trade:N' };
  const [part, rest] = await readLanes(
    db(),
    [
      { lane, afterSeq: held.at(-1)!.seq },
      { lane: { platformCode: code, resourceKey: 'trade:M' }, afterSeq: 0 },
    ],
    2,
  );
  assert.deepEqual(
    part!.rows.map((r) => r.notification_id),
    ids.slice(2, 4),
  );
  assert.equal(part!.complete, false);
  assert.deepEqual(
    rest!.rows.map((r) => r.notification_id),
    [other],
  );
  assert.equal(rest!.complete, true);
});
