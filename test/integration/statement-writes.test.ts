import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { mayWrite, WRITING_FUNCTIONS } from '../../src/store/database.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';

/**
 * A statement outside a transaction whose connection is lost answers 502 when it may have written, a
 * retryable 503 when it cannot have (test/integration/write-outcome-unknown.test.ts): `mayWrite` decides.
 */
test('mayWrite: a select is a read unless it calls one of the schema’s writing functions', () => {
  for (const read of [
    'select "platform_code" from "api_keys" where "api_key" = $1',
    'select webhook_lane_partition($1, $2)',
    'SELECT count(*) FROM trades',
    'select webhook_skip_reason($1, $2, $3)',
    'select count(*) from graphile_worker.jobs',
  ])
    assert.equal(mayWrite(read), false, read);
  for (const write of [
    'insert into "trades" ("trade_id") values ($1)',
    'update "platforms" set "name" = $1',
    'delete from quotes where quote_id = any($1)',
    'with inserted as (insert into t values (1) returning 1) select * from inserted',
    'select * from webhook_lease_partitions($1, $2::int, $3::smallint[], $4)',
    '\n    select * from webhook_record_attempts($1, $2::jsonb)',
    'SELECT WEBHOOK_WAKE_LANE ($1, $2)',
    'select * from public.webhook_record_attempts($1, $2::jsonb)',
    // A job added is a write (src/jobs/enqueue.ts).
    'select (graphile_worker.add_job($1::text, $2::json, queue_name => null)).id',
    'select graphile_worker.add_jobs(array[]::graphile_worker.job_spec[])',
    '-- a comment first\nselect 1',
  ])
    assert.equal(mayWrite(write), true, write);
});

let database: TestDatabase;
let client: pg.Client;
before(async () => {
  database = await createTestDatabase();
  client = new pg.Client({ connectionString: database.url });
  await client.connect();
});
after(async () => {
  await client?.end();
  await database?.drop();
});

// By name: a function's overloads are one name to mayWrite.
test('every volatile function the migrations leave (but triggers) is listed as writing, and only those', async () => {
  const { rows } = await client.query<{ name: string }>(`
    select distinct p.proname as name from pg_proc p join pg_namespace n on n.oid = p.pronamespace
    where n.nspname = 'public' and p.provolatile = 'v' and p.prorettype <> 'trigger'::regtype
    order by 1`);
  assert.deepEqual(
    rows.map((r) => r.name),
    [...WRITING_FUNCTIONS].sort(),
  );
});
