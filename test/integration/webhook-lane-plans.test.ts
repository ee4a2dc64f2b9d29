import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { createTestDatabaseWithClient, type TestDatabaseWithClient } from '../helpers/database.ts';

/**
 * The lane functions keep one plan per statement and connection (migration 0009). Those plans are made on
 * the first call, which on a new database is when the tables are nearly empty; they must still find rows
 * through keys and indexes once the tables have grown, never by reading a whole table per batch, nor a
 * lane's notifications through an index wider than the lane (migration 0011). The plans
 * are read with auto_explain (shipped with PostgreSQL), sent to this connection as notices.
 */
let testDb: TestDatabaseWithClient;
before(async () => {
  testDb = await createTestDatabaseWithClient();
  await addPlatform('PLANS1');
});
after(() => testDb?.close());

/** A platform with a webhook. */
async function addPlatform(code: string): Promise<void> {
  await testDb.client.query(`insert into platforms (platform_code, name) values ($1, 'Plans')`, [code]);
  await testDb.client.query(
    `insert into webhook_endpoints (platform_code, url) values ($1, 'http://127.0.0.1:9/x')`,
    [code],
  );
}

/** Records `count` notifications of `platform`, each on a lane of its own, the first `dueAgoMs` + `count` ms ago, the last `dueAgoMs` ago. */
async function record(count: number, tag: string, platform = 'PLANS1', dueAgoMs = 0): Promise<void> {
  await testDb.client.query(
    `insert into webhook_notifications (notification_id, platform_code, payload_type, resource_key, payload)
     select gen_random_uuid(), $3, 'trade_status_changed', $1 || i, '{}'::jsonb from generate_series(1, $2::int) i`,
    [`trade:${tag}-`, count, platform],
  );
  await testDb.client.query(
    `insert into webhook_lanes (platform_code, resource_key, due_at)
     select $3, $1 || i, clock_timestamp() - ($4::int + $2::int - i) * interval '1 millisecond'
     from generate_series(1, $2::int) i`,
    [`trade:${tag}-`, count, platform, dueAgoMs],
  );
}

/**
 * A connection whose every statement's plan is sent to it (auto_explain), into `plans`, with the pages each read
 * if `buffers`; or why it cannot be had.
 */
async function explainingClient(plans: string[], buffers = false): Promise<pg.Client | string> {
  const client = new pg.Client({
    connectionString: testDb.database.url,
    options:
      '-c session_preload_libraries=auto_explain -c auto_explain.log_min_duration=0 ' +
      '-c auto_explain.log_nested_statements=on -c auto_explain.log_level=notice' +
      (buffers ? ' -c auto_explain.log_analyze=on -c auto_explain.log_buffers=on' : ''),
  });
  client.on('notice', (notice) => plans.push(notice.message ?? ''));
  try {
    await client.connect();
    return client;
  } catch (err) {
    return `auto_explain cannot be loaded here (${(err as Error).message})`;
  }
}

/**
 * One dispatcher's round: claim up to `limit` lanes (at most `capped.limit` of the `capped` platforms', as a
 * worker does while their receivers are slow, migration 0022), then record every head delivered and give the
 * lanes back.
 */
async function claimAndSettle(
  client: pg.Client,
  limit: number,
  capped = { platforms: [] as string[], limit: 0 },
): Promise<number> {
  const claimed = await client.query(
    `select platform_code, resource_key, notification_id, state_token
     from webhook_claim_lanes('t1', $1, 17000, 20, $2::text[], $3::int)`,
    [limit, capped.platforms, capped.limit],
  );
  const items = claimed.rows.map((row: Record<string, string | null>, i: number) => ({
    idx: i + 1,
    platform_code: row.platform_code,
    resource_key: row.resource_key,
    renew: i === 0,
    release: true,
    id: row.notification_id,
    token: row.state_token,
    new_token: crypto.randomUUID(),
    attempted: true,
    started_at_ms: Date.now(),
    duration_ms: 1,
    status_code: 204,
    error: null,
    outcome: 'delivered',
    status: 'delivered',
    reason: null,
    round_attempts: 0,
    delay_ms: null,
  }));
  if (items.length) {
    await client.query(`select * from webhook_settle_lanes('t1', 17000, $1::jsonb)`, [JSON.stringify(items)]);
  }
  return items.length;
}

test('plans made while the tables were nearly empty still use keys and indexes once they have grown', async (t) => {
  const plans: string[] = [];
  const client = await explainingClient(plans);
  if (typeof client === 'string') {
    t.skip(client);
    return;
  }
  try {
    // The first calls plan every statement, with the tables empty and their statistics saying so (as
    // autovacuum leaves a new database's), but for one lane found empty (its notification already delivered
    // by someone else, say): every index then looks as cheap as any other.
    await testDb.client.query('vacuum analyze webhook_notifications, webhook_lanes');
    await testDb.client.query(
      `insert into webhook_lanes (platform_code, resource_key, due_at) values ('PLANS1', 'trade:gone', now())`,
    );
    assert.equal(await claimAndSettle(client, 10), 1);
    await record(1, 'first');
    assert.equal(await claimAndSettle(client, 10, { platforms: ['PLANS1'], limit: 1 }), 1);

    await record(3_000, 'grown');
    plans.length = 0;
    assert.equal(await claimAndSettle(client, 50), 50);
    assert.equal(await claimAndSettle(client, 50, { platforms: ['PLANS1'], limit: 5 }), 5);

    const lanePlans = plans.filter((p) => /webhook_(lanes|notifications|attempts|endpoints)/.test(p));
    assert.ok(lanePlans.length >= 5, `the lane functions' statements were explained (${lanePlans.length})`);
    const wholeTable = lanePlans.filter((p) => /Seq Scan on webhook_/.test(p));
    assert.deepEqual(wholeTable, [], 'no statement reads a whole lane or notification table');
    // A lane's oldest notifications are found through both of its keys (the undelivered index): an index on
    // the platform alone, or on seq alone, reads every notification of the platform, or every undelivered one.
    const wideIndex = lanePlans.filter((p) =>
      /Index Scan using webhook_notifications_(platform|open_since|resource) /.test(p),
    );
    assert.deepEqual(wideIndex, [], "no statement finds a lane's notifications through a wider index");
    assert.ok(
      lanePlans.some((p) => /Index Scan using webhook_notifications_undelivered /.test(p)),
      'the lanes are read through the undelivered index',
    );
    // A claim reads each platform's due lanes only (0024): the platform and "due" bound the range of the index
    // on both. With "due" a filter (a volatile clock_timestamp() cannot be an index condition), a claim that
    // found fewer due lanes than it asked for read every lane to the end of the index, leased or waiting for a
    // retry (review, before 0022: 31-43 ms a claim). And no statement that finds a lane by its key takes this
    // index, which begins with the platform too, for the primary key: it would read every lane of the platform
    // per lane looked up (hence its "C" collation, which only the claim asks for).
    const platformDueScans = lanePlans.flatMap((p) =>
      [
        ...p.matchAll(
          /Index Scan using webhook_lanes_platform_due on webhook_lanes.*\n(\s+Index Cond: [^\n]*)?/g,
        ),
      ].map((m) => m[1] ?? '(no index condition)'),
    );
    assert.ok(
      platformDueScans.length >= 2,
      `the claims' due scans were explained (${platformDueScans.length})`,
    );
    for (const cond of platformDueScans)
      assert.match(
        cond,
        /Index Cond: \(\(\(platform_code\)::text = ANY \(ARRAY\[r\.code\]\)\) AND \(due_at <= \$\d+\)\)/,
        "the index is read for one platform's due lanes only",
      );
    // Nor does a claim take the index on due_at alone for a platform's due lanes (its order is theirs, the
    // platform being one value): it would pass over every other platform's lanes due earlier.
    assert.deepEqual(
      lanePlans.filter((p) => /Index Scan using webhook_lanes_due /.test(p)),
      [],
      'no lane function reads the index on due_at alone',
    );
  } finally {
    await client.end();
  }
});

test("planned on grown tables, a claim reads each platform's due lanes and no other (0024)", async (t) => {
  // Without the test before's lanes, so the plans are made on these statistics alone, and without these after.
  const clear = () => testDb.client.query('truncate webhook_lanes, webhook_notifications cascade');
  await clear();
  t.after(clear);
  await addPlatform('PLANS2');
  await addPlatform('PLANS3');
  // PLANS1: a backlog due long before the others' lanes. Through the index on due_at alone (which gives one
  // platform's due lanes in order too), another platform's were found only past the whole backlog.
  await record(20_000, 'backlog', 'PLANS1', 3_600_000);
  await record(100, 'other', 'PLANS2');
  // PLANS3: a few lanes due, and many waiting for a retry (a receiver that was down). Read as the range from
  // (platform, start of time) to (platform, now), the scan stopped only at the next platform, so it passed
  // over every one of those on each claim.
  await record(3, 'retry-due', 'PLANS3');
  await testDb.client.query(
    `insert into webhook_lanes (platform_code, resource_key, due_at)
     select 'PLANS3', 'trade:retrying-' || i, clock_timestamp() + interval '1 hour' from generate_series(1, 100000) i`,
  );
  await testDb.client.query('analyze webhook_notifications, webhook_lanes');
  const plans: string[] = [];
  const client = await explainingClient(plans, true);
  if (typeof client === 'string') {
    t.skip(client);
    return;
  }
  try {
    assert.equal(await claimAndSettle(client, 90), 90);
    const shares = plans.filter((p) => /cross join lateral/.test(p) && /webhook_lanes_platform_due/.test(p));
    assert.ok(shares.length > 0, 'the claim was explained');
    assert.deepEqual(
      plans.filter((p) => /Index Scan using webhook_lanes_due /.test(p)),
      [],
      'no lane function reads the index on due_at alone',
    );
    // 90 lanes taken and locked, each a heap page or two; passing over PLANS3's waiting lanes is ~500 index
    // pages more, and over PLANS1's backlog 20,000 heap fetches.
    for (const plan of shares) {
      const [, hit = '0', read = '0'] = /Buffers: shared hit=(\d+)(?: read=(\d+))?/.exec(plan) ?? [];
      const pages = Number(hit) + Number(read);
      t.diagnostic(`pages read by a round of the claim: ${pages}`);
      assert.ok(pages < 400, `a round of the claim read ${pages} pages`);
    }
  } finally {
    await client.end();
  }
});

test('the claim answers created_at as before 0012 (a worker of the version before reads it by name), and round_started_at', async () => {
  await record(1, 'columns');
  await testDb.client.query(
    `update webhook_notifications set created_at = now() - interval '2 days', redelivered_at = now()
     where resource_key = 'trade:columns-1'`,
  );
  // The oldest due lane, and the only platform's (the test before leaves none), so that it is the one claimed.
  await testDb.client.query(
    `update webhook_lanes set due_at = now() - interval '1 day' where resource_key = 'trade:columns-1'`,
  );
  const { rows } = await testDb.client.query<{ created_at: Date; round_started_at: Date }>(
    `select created_at, round_started_at from webhook_claim_lanes('columns', 1, 17000, 20)
     where resource_key = 'trade:columns-1'`,
  );
  assert.equal(rows.length, 1);
  assert.ok(Date.now() - rows[0]!.created_at.getTime() > 24 * 3600_000, 'created_at: the commit');
  assert.ok(Date.now() - rows[0]!.round_started_at.getTime() < 3600_000, 'round_started_at: the redelivery');
});
