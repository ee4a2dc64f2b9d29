import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { loadPartitions, readAfter } from '../../src/domain/webhooks/lane-reads.repository.ts';
import type { Db } from '../../src/store/database.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';

/**
 * A worker's read after its cursor must cost what it brings, not the outbox's history: asked for in seq order, the
 * planner once read the seq index backwards from the cursor over every notification ever recorded, for the few
 * committed late (bench: PostgreSQL's CPU per delivery 1.5 times the record's). Here the statistics were taken
 * during a backlog since delivered, as after a busy hour; the plans are read with
 * auto_explain (shipped with PostgreSQL), sent to the connection as notices.
 */
let database: TestDatabase;
let pool: pg.Pool;
let db: Db;
const plans: string[] = [];
let unavailable: string | null = null;
const PARTITIONS = Array.from({ length: 64 }, (_, i) => i);

before(async () => {
  database = await createTestDatabase();
  pool = new pg.Pool({
    connectionString: database.url,
    max: 1,
    options:
      '-c session_preload_libraries=auto_explain -c auto_explain.log_min_duration=0 ' +
      '-c auto_explain.log_level=notice -c auto_explain.log_analyze=on',
  });
  pool.on('connect', (client) => client.on('notice', (notice) => plans.push(notice.message ?? '')));
  try {
    await pool.query('select 1');
  } catch (err) {
    unavailable = `auto_explain cannot be loaded here (${(err as Error).message})`;
  }
  db = new Kysely({ dialect: new PostgresDialect({ pool }) }) as unknown as Db;
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
  assert.match(plan, /webhook_notifications_open_txid/, plan);
  assert.doesNotMatch(plan, /Index Cond: \(seq <=|Seq Scan/, plan);
});
