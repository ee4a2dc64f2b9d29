import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Kysely, PostgresDialect, type CompiledQuery } from 'kysely';
import pg from 'pg';
import { listBalanceAccounts } from '../../src/domain/accounts/balance-accounts.repository.ts';
import { findFundEvents, listFundEvents } from '../../src/domain/funding/funding.repository.ts';
import {
  emailOnOtherPlatform,
  findParticipantsByEmail,
  findPlatformParticipantByEmail,
  listPlatformCustomers,
} from '../../src/domain/participants/participants.repository.ts';
import { deleteUnexecutedQuotesExpiredBefore } from '../../src/domain/quotes/quotes.repository.ts';
import { findOverdueTrades, listPlatformTrades } from '../../src/domain/trades/trades.repository.ts';
import type { Database } from '../../src/store/schema.ts';
import { createTestDatabase, createTestPool, type TestDatabase } from '../helpers/database.ts';

/**
 * The list endpoints and the quote purge reach their rows through an index that gives them in the order
 * asked (migration 0020, quotes.repository.ts), not by reading and sorting a platform's every row, which at
 * production volume cost tens to hundreds of ms a page (review: 200k trades, 200k balance accounts, 300k
 * quotes). The statements are the repositories' own, captured as Kysely runs them, and explained with
 * sequential scans priced out (`enable_seqscan = off`): on a small test table the planner would read it
 * whole whatever indexes exist, so this asks which index can serve the statement, not what today's
 * statistics prefer. And a page past the end costs the count alone (domain/paging.ts rowsAndCount).
 */
let database: TestDatabase;
let pool: pg.Pool;
let db: Kysely<Database>;
let captured: CompiledQuery[] = [];

before(async () => {
  database = await createTestDatabase();
  pool = createTestPool({ connectionString: database.url, max: 2 });
  db = new Kysely<Database>({
    dialect: new PostgresDialect({ pool }),
    log: (event) => {
      if (event.level === 'query') captured.push(event.query);
    },
  });
});
after(async () => {
  await db?.destroy();
  await database?.drop();
});

interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  'Index Cond'?: string;
  Plans?: PlanNode[];
}

/**
 * Each statement `run` sends, its plan's nodes (depth first) as `say` says them, with sequential scans priced
 * out and `settings` in force.
 */
async function explainEach(
  run: () => Promise<unknown>,
  say: (node: PlanNode) => string | undefined,
  settings: string[] = [],
): Promise<string[][]> {
  captured = [];
  await run();
  const plans: string[][] = [];
  const client = await pool.connect();
  try {
    for (const query of captured) {
      await client.query('begin');
      await client.query('set local enable_seqscan = off');
      for (const setting of settings) await client.query(`set local ${setting}`);
      const { rows } = await client.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(
        `explain (format json) ${query.sql}`,
        [...query.parameters],
      );
      await client.query('rollback');
      const nodes: string[] = [];
      const walk = (node: PlanNode) => {
        const described = say(node);
        if (described !== undefined) nodes.push(described);
        node.Plans?.forEach(walk);
      };
      walk(rows[0]!['QUERY PLAN'][0]!.Plan);
      plans.push(nodes);
    }
  } finally {
    client.release();
  }
  return plans;
}

/** The plan of each statement `run` sends, as node types and index names ("Index Scan:trades_owner_time"). */
function plansOf(run: () => Promise<unknown>, settings: string[] = []): Promise<string[][]> {
  return explainEach(
    run,
    (node) => (node['Index Name'] ? `${node['Node Type']}:${node['Index Name']}` : node['Node Type']),
    settings,
  );
}

/**
 * The index conditions of each statement `run` sends ("participants_email: (lower(...) = $1)"). A partial index
 * read whole, its rows filtered after, has none.
 */
function indexConditionsOf(run: () => Promise<unknown>): Promise<string[][]> {
  return explainEach(run, (node) =>
    node['Index Cond'] ? `${node['Index Name']}: ${node['Index Cond']}` : undefined,
  );
}

const page = { limit: 20, offset: 40 };

test('GET /accounts: the page comes in order from balance_accounts_platform_created, unsorted', async () => {
  const [list] = await plansOf(() => listBalanceAccounts(db, { platformCode: 'PLAN01' }, 40, 20));
  assert.ok(
    list!.some((n) => n.endsWith(':balance_accounts_platform_created')),
    list!.join(' > '),
  );
  assert.ok(!list!.includes('Sort'), list!.join(' > '));
});

test('GET /participants: the customers come in order from participants_customers_created, unsorted', async () => {
  const [list] = await plansOf(() => listPlatformCustomers(db, 'PLAN01', {}, page));
  assert.ok(
    list!.some((n) => n.endsWith(':participants_customers_created')),
    list!.join(' > '),
  );
  assert.ok(!list!.includes('Sort'), list!.join(' > '));
});

/**
 * A platform with 20,000 trades among 200 participants, analysed: on an empty table the planner thinks walking
 * every trade of the platform newest first as cheap as anything. Labels, underlyings and quoted currencies vary.
 */
async function seedTrades(platformCode: string, participantPrefix: string): Promise<void> {
  await pool.query(`insert into platforms (platform_code, name) values ($1, 'Trades')`, [platformCode]);
  await pool.query(
    `insert into participants (participant_code, platform_code)
     select $2 || lpad(i::text, 4, '0'), $1 from generate_series(1, 200) i`,
    [platformCode, participantPrefix],
  );
  await pool.query(
    `insert into trades (trade_id, platform_code, client_trade_id, source, participant_code,
       owner_participant_code, account_label, counterparty_code, side, underlying, quoted_currency,
       trade_price, trade_quantity, total_notional, asset_cost_notional, pay_asset, pay_amount,
       receive_asset, receive_amount, transaction_at, accepted_at, settlement_at, updated_at)
     select gen_random_uuid(), $1, 'c' || i, 'operator', o, o, 'label' || (i % 50), c, 'buy',
       'A' || (i % 40), 'Q' || (i % 30), 1, 1, 1, 1, 'USD', 1, 'BTC', 1, t, t, t, t
     from generate_series(1, 20000) i,
       lateral (select $2 || lpad((1 + i % 200)::text, 4, '0') as o,
                       $2 || lpad((1 + (i * 7) % 200)::text, 4, '0') as c,
                       now() - i * interval '1 minute' as t) x`,
    [platformCode, participantPrefix],
  );
  await pool.query('analyze participants, trades');
}

/** Whether every plan reads through each of `indexes`. */
function assertReadThrough(plans: string[][], ...indexes: string[]): void {
  for (const plan of plans)
    for (const index of indexes)
      assert.ok(
        plan.some((n) => n.endsWith(`:${index}`)),
        `${index}: ${plan.join(' > ')}`,
      );
}

test('GET /trades?party_code=: the trades of either side come through the owner and counterparty indexes', async () => {
  await seedTrades('PLAN02', 'T2');
  const plans = await plansOf(() => listPlatformTrades(db, 'PLAN02', { partyCodes: ['T20042'] }, page));
  assertReadThrough(plans, 'trades_owner_time', 'trades_counterparty_time');
});

test('GET /trades?account_label= and ?asset=: through the label index in order, and the underlying and quoted-currency indexes', async () => {
  await seedTrades('PLAN03', 'T3');
  const label = await plansOf(() => listPlatformTrades(db, 'PLAN03', { accountLabel: 'label7' }, page));
  assertReadThrough(label, 'trades_label_time');
  assert.ok(!label[0]!.includes('Sort'), label[0]!.join(' > '));
  // An asset the platform rarely trades, the case that read every trade: a common one is met soon enough in the
  // newest-first walk of trades_platform_time.
  const asset = await plansOf(() => listPlatformTrades(db, 'PLAN03', { asset: 'RARE' }, page));
  assertReadThrough(asset, 'trades_underlying_time', 'trades_quoted_time');
});

test('GET /fund/transactions?fund_asset= and GET /accounts?asset=: through their asset indexes, in order', async () => {
  const funds = await plansOf(() => listFundEvents(db, 'PLAN01', { fund_asset: 'BTC.BTC' }, page));
  assertReadThrough(funds, 'fund_events_asset');
  assert.ok(!funds[0]!.includes('Sort'), funds[0]!.join(' > '));
  const [accounts] = await plansOf(() =>
    listBalanceAccounts(db, { platformCode: 'PLAN01', asset: 'USD' }, 40, 20),
  );
  assertReadThrough([accounts!], 'balance_accounts_asset_created');
  assert.ok(!accounts!.includes('Sort'), accounts!.join(' > '));
});

test('GET /admin/deposits: by transaction id through its index (0038), by address through the unique one', async () => {
  // Review: the unique (deposit_address, transaction_id) index leads with the address; by the id alone, support's
  // lookup read every fund event of every platform.
  const plans = await plansOf(async () => {
    await findFundEvents(db, { transactionIds: ['ab'.repeat(32), `0x${'ab'.repeat(32)}`] }, page);
    await findFundEvents(db, { depositAddress: 'bc1qexample' }, page);
  });
  // Each statement of a page, and its count.
  const [byId, , byAddress] = plans;
  assertReadThrough([byId!], 'fund_events_transaction');
  assert.ok(
    byAddress!.some((n) => n.includes(':fund_events_deposit_address_transaction_id_key')),
    byAddress!.join(' > '),
  );
});

test('GET /fund/transactions?success=false: the failures through an index of their own, in order (0035)', async () => {
  // At volume, a platform's every fund event was read and counted for its few failures (145-185 ms a page).
  const failed = await plansOf(() => listFundEvents(db, 'PLAN01', { success: false }, page));
  assertReadThrough(failed, 'fund_events_failed');
  assert.ok(!failed[0]!.includes('Sort'), failed[0]!.join(' > '));
});

test('GET /participants?minors=true: the few minors come through their date of birth, not every submission (0035)', async () => {
  // 20,000 customers, three of them minors, analysed; planned as PostgreSQL would, sequential scans allowed.
  await pool.query(`insert into platforms (platform_code, name) values ('PLAN06', 'Minors')`);
  await pool.query(
    `insert into participants (participant_code, platform_code, created_at)
     select 'M' || lpad(i::text, 5, '0'), 'PLAN06', now() - i * interval '1 minute' from generate_series(1, 20000) i`,
  );
  await pool.query(
    `insert into customer_submissions (participant_code, platform_code, payload_hash, payload, response)
     select 'M' || lpad(i::text, 5, '0'), 'PLAN06', md5(i::text) || md5('x' || i),
       jsonb_build_object('date_of_birth', case when i % 7000 = 0 then '2010-01-01'
         else to_char(date '1950-01-01' + (i % 14000), 'YYYY-MM-DD') end), '{}'
     from generate_series(1, 20000) i`,
  );
  await pool.query('analyze participants, customer_submissions');
  const minors = await plansOf(
    () => listPlatformCustomers(db, 'PLAN06', { bornAfter: '2008-12-06' }, { limit: 20, offset: 0 }),
    ['enable_seqscan = on'],
  );
  assert.equal(minors.length, 2, 'the page and its count');
  assertReadThrough(minors, 'customer_submissions_date_of_birth');
});

test('GET /participants?email=: PostgreSQL expects one customer of an email, not 0.5 % of the platform (0035)', async () => {
  // Both indexes on lower(email) are partial, and PostgreSQL keeps no statistics of a partial index's expression:
  // it guessed 500 of 100,000 customers and walked them all in the listing's order instead (57 ms; review).
  await pool.query(`insert into platforms (platform_code, name) values ('PLAN05', 'Emails')`);
  await pool.query(
    `insert into participants (participant_code, platform_code, email, created_at)
     select 'E' || lpad(i::text, 5, '0'), 'PLAN05', 'user' || i || '@example.com', now() - i * interval '1 minute'
     from generate_series(1, 20000) i`,
  );
  await pool.query('analyze participants');
  captured = [];
  await listPlatformCustomers(db, 'PLAN05', { email: 'USER77@example.com' }, page);
  const estimates: number[] = [];
  for (const query of captured) {
    const { rows } = await pool.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode & { 'Plan Rows': number } }> }>(
      `explain (format json) ${query.sql}`,
      [...query.parameters],
    );
    const walk = (node: PlanNode & { 'Plan Rows'?: number; 'Relation Name'?: string }) => {
      if (node['Relation Name'] === 'participants') estimates.push(node['Plan Rows']!);
      (node.Plans as (typeof node)[] | undefined)?.forEach(walk);
    };
    walk(rows[0]!['QUERY PLAN'][0]!.Plan);
  }
  assert.ok(estimates.length >= 2, `the page and its count read participants: ${estimates.join(', ')}`);
  for (const estimate of estimates)
    assert.ok(estimate <= 2, `expected about one row, planned for ${estimate}`);
});

test('the look-ups by email find it in an index on lower(email collate "C") (0042)', async () => {
  // A look-up whose expression is not the index's, letter for letter, can only read a partial index whole.
  const conditions = [
    ...(await indexConditionsOf(() => findPlatformParticipantByEmail(db, 'PLAN05', 'User7@example.com'))),
    ...(await indexConditionsOf(() => findParticipantsByEmail(db, 'User7@example.com'))),
    ...(await indexConditionsOf(() => emailOnOtherPlatform(db, 'PLAN05', 'User7@example.com'))),
  ];
  assert.equal(conditions.length, 3);
  for (const found of conditions)
    assert.ok(
      found.some((c) => /^participants_(platform_)?email: .*lower\(\(?email\)?::text\)/.test(c)),
      found.join('; ') || 'no index condition',
    );
});

test('the settlement sweep reads the unsettled trades alone, oldest first, through trades_unsettled_updated_id', async () => {
  await seedTrades('PLAN04', 'T4');
  const bounds = { accepted: new Date(), active: new Date(), acceptedDue: new Date() };
  const after = { trade_id: '00000000-0000-4000-8000-000000000000', trade_state: 'accepted' as const };
  const plans = await plansOf(async () => {
    await findOverdueTrades(db, bounds, 500, null);
    // Going on where the last run stopped.
    await findOverdueTrades(db, bounds, 500, { ...after, updated_at: new Date(0) });
  });
  assert.equal(plans.length, 2);
  assertReadThrough(plans, 'trades_unsettled_updated_id');
  for (const plan of plans) assert.ok(!plan.some((node) => /Sort/.test(node)), plan.join(' > '));
});

test('the quote purge probes each quote of its batch by key, without joining a scan of every quote', async () => {
  const [purge] = await plansOf(() => deleteUnexecutedQuotesExpiredBefore(db, new Date(), 5_000));
  // No join of the batch with the table (at volume, a hash join over a scan of every quote).
  assert.ok(!purge!.some((n) => /Hash|Nested Loop|Merge Join/.test(n)), purge!.join(' > '));
  assert.ok(
    purge!.some((n) => n.endsWith(':quotes_pkey')),
    purge!.join(' > '),
  );
  assert.ok(
    purge!.some((n) => n.endsWith(':quotes_unexecuted_expiry')),
    purge!.join(' > '),
  );
});

test('a page past the end is not read: the count alone answers it (its OFFSET walked every matching row)', async () => {
  const deep = { limit: 100, offset: 99_999_900 };
  const listings = {
    trades: () => listPlatformTrades(db, 'PLAN01', {}, deep),
    'fund events': () => listFundEvents(db, 'PLAN01', {}, deep),
    customers: () => listPlatformCustomers(db, 'PLAN01', {}, deep),
  };
  for (const [name, list] of Object.entries(listings)) {
    captured = [];
    const answer = (await list()) as { rows: unknown[] };
    assert.deepEqual(answer.rows, [], name);
    assert.equal(captured.length, 1, `${name}: ${captured.map((q) => q.sql).join('; ')}`);
    assert.match(captured[0]!.sql, /count\(\*\)/, name);
  }
  // A first page reads both, side by side.
  captured = [];
  await listPlatformTrades(db, 'PLAN01', {}, { limit: 100, offset: 0 });
  assert.equal(captured.length, 2);
});
