import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import {
  loadPartitions,
  readAfter,
  type ReadCursor,
} from '../../src/domain/webhooks/lane-reads.repository.ts';
import type { Db } from '../../src/store/database.ts';
import { createTestDatabase, createTestPool, type TestDatabase } from '../helpers/database.ts';

/**
 * A worker's read after its cursor must cost what it brings, not the outbox's history: asked for in seq order, the
 * planner once read the seq index backwards from the cursor over every notification ever recorded, for the few
 * committed late (bench: PostgreSQL's CPU per delivery 1.5 times the record's). Here the statistics were taken
 * during a backlog since delivered, as after a busy hour; the plans are read with
 * auto_explain (shipped with PostgreSQL), sent to the connection as notices (the read's own statement is nested in
 * migration 0032's function).
 */
let database: TestDatabase;
let pool: pg.Pool;
let db: Db;
const plans: string[] = [];
let unavailable: string | null = null;
const PARTITIONS = Array.from({ length: 64 }, (_, i) => i);

/** One connection to `url` whose every statement's plan, with its row counts, is pushed to `plans`. */
function explainedConnection(url: string): { pool: pg.Pool; db: Db } {
  const explained = createTestPool({
    connectionString: url,
    max: 1,
    options:
      '-c session_preload_libraries=auto_explain -c auto_explain.log_min_duration=0 ' +
      '-c auto_explain.log_level=notice -c auto_explain.log_analyze=on -c auto_explain.log_nested_statements=on',
  });
  explained.on('connect', (client) => client.on('notice', (notice) => plans.push(notice.message ?? '')));
  return {
    pool: explained,
    db: new Kysely({ dialect: new PostgresDialect({ pool: explained }) }) as unknown as Db,
  };
}

before(async () => {
  database = await createTestDatabase();
  ({ pool, db } = explainedConnection(database.url));
  try {
    await pool.query('select 1');
  } catch (err) {
    unavailable = `auto_explain cannot be loaded here (${(err as Error).message})`;
  }
});
after(async () => {
  await pool?.end();
  await database?.drop();
});

test('the read after the cursor finds late commits through the txid index, not the history below the cursor', async (t) => {
  if (unavailable) return t.skip(unavailable);
  await sql`insert into platforms (platform_code, name) values ('PLANS1', 'Plans')`.execute(db);
  await sql`insert into webhook_endpoints (platform_code, url) values ('PLANS1', 'http://127.0.0.1:9/x')`.execute(
    db,
  );
  // A history of notifications, analysed while undelivered (a backlog), then delivered.
  await sql`insert into webhook_notifications (notification_id, platform_code, payload_type, resource_key, payload)
    select gen_random_uuid(), 'PLANS1', 'trade_status_changed', 'trade:old-' || i, '{}'::jsonb
    from generate_series(1, 20000) i`.execute(db);
  await sql`analyze webhook_notifications`.execute(db);
  await sql`update webhook_notifications set status = 'delivered', delivered_at = now()`.execute(db);
  const { cursor } = await loadPartitions(db, PARTITIONS, 1);
  // New ones, committed after the cursor's snapshot.
  await sql`insert into webhook_notifications (notification_id, platform_code, payload_type, resource_key, payload)
    select gen_random_uuid(), 'PLANS1', 'trade_status_changed', 'trade:new-' || i, '{}'::jsonb
    from generate_series(1, 2000) i`.execute(db);
  plans.length = 0;
  const read = await readAfter(db, PARTITIONS, cursor, 500);
  assert.equal(read.rows.length, 500);
  const plan = plans.find((p) => p.includes('pg_current_snapshot'));
  assert.ok(plan, `the read's plan, among ${plans.length}`);
  // The late commits through the txid index (a few rows), never a range of the seq index below the cursor.
  assertLateThroughTxidIndex(plan);
  assert.doesNotMatch(plan, /Index Cond: \(seq <=|Seq Scan/, plan);
});

/**
 * Rows a plan's scans read: what each scan node returned and what its filter removed (a bitmap index scan's rows are
 * its heap scan's, counted there).
 */
function rowsScanned(plan: string): number {
  let rows = 0;
  const lines = plan.split('\n');
  for (const line of lines) {
    if (line.includes('Bitmap Index Scan')) continue;
    const scan =
      /(?:Index Scan|Index Only Scan|Seq Scan|Bitmap Heap Scan).*actual time=[\d.]+\.\.[\d.]+ rows=(\d+) loops=(\d+)/.exec(
        line,
      );
    if (scan) rows += Number(scan[1]) * Number(scan[2]);
    const removed = /Rows Removed by Filter: (\d+)/.exec(line);
    if (removed) rows += Number(removed[1]);
  }
  return rows;
}

/**
 * The scans of a read's late commits (the plan's `CTE late`): each through the txid index, in its order (migration
 * 0033). On no statistics and a grown table the planner read them through the partition index instead (a bitmap scan
 * of every undelivered notification of the partitions, dead entries included: 360,000 for a backlog of 40,000 in
 * bench/webhook-reads.bench.ts), at every read; and before 0033 it chose between the two by a few pages of their sizes
 * (a bitmap scan of either, here), a choice no statistics can be trusted to make.
 */
function lateScans(plan: string): string[] {
  const lines = plan.split('\n');
  const start = lines.findIndex((line) => /^\s*CTE late$/.test(line));
  assert.ok(start >= 0, plan);
  const indent = lines[start]!.search(/\S/);
  const scans: string[] = [];
  for (const line of lines.slice(start + 1)) {
    if (line.search(/\S/) <= indent) break;
    const scan =
      /->\s+((?:Parallel )?(?:Index Only Scan|Index Scan|Bitmap Heap Scan|Bitmap Index Scan|Seq Scan)(?: Backward)?(?: using| on) \S+)/.exec(
        line,
      );
    if (scan) scans.push(scan[1]!);
  }
  return scans;
}

function assertLateThroughTxidIndex(plan: string): void {
  const scans = lateScans(plan);
  assert.ok(scans.length > 0, plan);
  for (const scan of scans) assert.equal(scan, 'Index Scan using webhook_notifications_open_txid', plan);
}

/**
 * Reads a backlog of `backlog` notifications committed after `cursor` through, 500 at a time as a worker does, and
 * checks that each read went from the cursor in seq order and that all of them together scanned about the backlog
 * once (plus the first read's look for late commits, which finds the backlog's transaction new to it and reads it
 * through the txid index, then passes it over as above the cursor): through another index whole, each read read what
 * was left of the backlog, twice, the square of a backlog's length.
 */
async function assertReadThroughLinear(db: Db, cursor: ReadCursor, backlog: number): Promise<void> {
  plans.length = 0;
  let read = 0;
  for (;;) {
    const next = await readAfter(db, PARTITIONS, cursor, 500);
    read += next.rows.length;
    cursor = next.cursor;
    if (next.rows.length < 500) break;
  }
  assert.equal(read, backlog);
  const reads = plans.filter((p) => p.includes('pg_current_snapshot'));
  assert.equal(reads.length, Math.floor(backlog / 500) + 1);
  // From the cursor through 0031's index in seq order (no Index Cond on it when the cursor is 0: its condition says it).
  for (const plan of reads.slice(0, -1))
    assert.match(plan, /Index Scan using webhook_notifications_open_seq/, plan);
  for (const plan of reads) assertLateThroughTxidIndex(plan);
  const scanned = reads.reduce((sum, plan) => sum + rowsScanned(plan), 0);
  assert.ok(scanned <= 3.5 * backlog, `the reads scanned ${scanned} rows for a backlog of ${backlog}`);
}

/** Records `count` undelivered notifications of `platform` in one transaction. */
async function recordBacklog(db: Db, platform: string, prefix: string, count: number): Promise<void> {
  await sql`insert into webhook_notifications (notification_id, platform_code, payload_type, resource_key, payload)
    select gen_random_uuid(), ${platform}, 'trade_status_changed', ${prefix} || i, '{}'::jsonb
    from generate_series(1, ${count}::int) i`.execute(db);
}

test('reading a backlog through costs what it brings: each read goes from the cursor in seq order, not through the backlog', async (t) => {
  if (unavailable) return t.skip(unavailable);
  await sql`insert into platforms (platform_code, name) values ('PLANS2', 'Plans')`.execute(db);
  // Statistics taken while nothing was pending (the table's usual state): every partial index of the undelivered
  // looks empty to the planner, and reading one whole as cheap as reading from the cursor.
  await recordBacklog(db, 'PLANS2', 'trade:old-', 5000);
  await sql`update webhook_notifications set status = 'delivered', delivered_at = now()`.execute(db);
  await sql`vacuum analyze webhook_notifications`.execute(db);
  const { cursor } = await loadPartitions(db, PARTITIONS, 40);
  await recordBacklog(db, 'PLANS2', 'trade:backlog-', 5000);
  await assertReadThroughLinear(db, cursor, 5000);
});

test("a worker holding a few partitions does not walk the others' backlog again at each read", async (t) => {
  if (unavailable) return t.skip(unavailable);
  await sql`insert into platforms (platform_code, name) values ('PLANS5', 'Plans')`.execute(db);
  await sql`update webhook_notifications set status = 'delivered', delivered_at = now()
    where status in ('pending', 'retrying')`.execute(db);
  const own = [7];
  let { cursor } = await loadPartitions(db, own, 40);
  // A few of this worker's notifications, then a backlog of other workers' partitions (a receiver down elsewhere).
  await sql`insert into webhook_notifications (notification_id, platform_code, payload_type, resource_key, payload)
    select gen_random_uuid(), 'PLANS5', 'trade_status_changed', 'trade:mine-' || i, '{}'::jsonb
    from generate_series(1, 2000) i where webhook_lane_partition('PLANS5', 'trade:mine-' || i) = 7`.execute(
    db,
  );
  const BACKLOG = 5000;
  await sql`insert into webhook_notifications (notification_id, platform_code, payload_type, resource_key, payload)
    select gen_random_uuid(), 'PLANS5', 'trade_status_changed', 'trade:elsewhere-' || i, '{}'::jsonb
    from generate_series(1, ${BACKLOG}::int) i where webhook_lane_partition('PLANS5', 'trade:elsewhere-' || i) <> 7`.execute(
    db,
  );
  plans.length = 0;
  for (let i = 0; i < 5; i++) {
    const next = await readAfter(db, own, cursor, 500);
    assert.ok(next.rows.length < 500);
    cursor = next.cursor;
  }
  const reads = plans.filter((p) => p.includes('pg_current_snapshot'));
  assert.equal(reads.length, 5);
  // The first read walks the backlog (from the cursor in seq order, the others' filtered out) and looks at it once for
  // late commits; the reads after it start past it. Before, the cursor stayed at this worker's last notification,
  // before the backlog, and each read walked the whole backlog again.
  const scanned = reads.reduce((sum, plan) => sum + rowsScanned(plan), 0);
  assert.ok(scanned <= 2.5 * BACKLOG, `5 reads scanned ${scanned} rows beside a backlog of ${BACKLOG}`);
});

test('on no statistics at all (a new database), the reads of a backlog go from the cursor', async (t) => {
  if (unavailable) return t.skip(unavailable);
  // A database of its own: the others' statistics were taken. Before 0032 the planner, on none, read the partition
  // index of the undelivered whole and sorted it, at each read; and a plan kept for any cursor (PL/pgSQL's generic
  // plan, from the sixth call) read the late commits through it, the whole backlog at each read.
  const fresh = await createTestDatabase();
  const { db: freshDb } = explainedConnection(fresh.url);
  try {
    await sql`insert into platforms (platform_code, name) values ('PLANS4', 'Plans')`.execute(freshDb);
    const { rows } = await sql<{
      analysed: boolean;
    }>`select (last_analyze is not null or last_autoanalyze is not null)
      as analysed from pg_stat_user_tables where relname = 'webhook_notifications'`.execute(freshDb);
    assert.equal(rows[0]!.analysed, false, 'the table has no statistics yet');
    const { cursor } = await loadPartitions(freshDb, PARTITIONS, 40);
    await recordBacklog(freshDb, 'PLANS4', 'trade:backlog-', 20000);
    await assertReadThroughLinear(freshDb, cursor, 20000);
  } finally {
    await freshDb.destroy();
    await fresh.drop();
  }
});
