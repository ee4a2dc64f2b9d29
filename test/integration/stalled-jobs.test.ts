import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { SelectQueryNode, sql, TableNode } from 'kysely';
import { ACCOUNT_TASKS, CREATION_STALLED_AFTER_MS } from '../../src/domain/accounts/accounts.jobs.ts';
import { EXPIRY_STALLED_AFTER_MS, fundingTaskList } from '../../src/domain/funding/funding.jobs.ts';
import { SETTLEMENT_STALLED_AFTER_MS, tradesTaskList } from '../../src/domain/trades/trades.jobs.ts';
import { createTradesService } from '../../src/domain/trades/trades.service.ts';
import { ManualClock } from '../../src/lib/clock.ts';
import { accountsJobRunner, jobRunner } from '../helpers/accounts-jobs.ts';
import { heldTransaction, holdingQueries } from '../helpers/held-queries.ts';
import { fundQuote, newAccountHolder, recordDeposit, setPrices, txId } from '../helpers/funding-fixtures.ts';
import { executeLiquidity, fund, getTrade, liquidityQuote } from '../helpers/trades-fixtures.ts';
import { startTestService, type PlatformFixture, type TestService } from '../helpers/test-service.ts';

/**
 * A job that used up its attempts (a database unreachable for days) left its work undone for good: an account
 * pending forever (details 404, the same request 409), a session never reported expired. A recurring sweep gives
 * such work its job again (review). The service runs no worker; its jobs are run on demand.
 */
const clock = new ManualClock(Date.now());
let svc: TestService;
let platform: PlatformFixture;
before(async () => {
  svc = await startTestService({ clock });
  platform = await svc.newPlatform();
  await setPrices(svc);
});
after(() => svc?.close());

/** Makes the job of `key` look as the queue leaves one that used up its attempts. */
async function exhaust(key: string): Promise<void> {
  const { numAffectedRows } = await sql`update graphile_worker._private_jobs
    set attempts = max_attempts, last_error = 'simulated: out of attempts'
    where key = ${key}`.execute(svc.runtime.store.db);
  assert.equal(numAffectedRows, 1n, `the job ${key}`);
}

/** The job of `key`: its attempts and how far from the database's now it is due (ms). */
async function job(key: string) {
  const { rows } = await sql<{ attempts: number; due_in_ms: number }>`select attempts,
      (extract(epoch from run_at - now()) * 1000)::float8 as due_in_ms
    from graphile_worker._private_jobs where key = ${key}`.execute(svc.runtime.store.db);
  return rows[0];
}

/** A trade booked now by a buyer of its own, accepted. */
async function acceptedTrade(): Promise<string> {
  const buyer = (await svc.newParticipant(platform.platform.platform_code)).participant_code;
  await fund(svc, buyer, 'USD', '100000');
  const quote = await liquidityQuote(platform.client, {
    side: 'buy',
    underlying: 'BTC',
    quoted_currency: 'USD',
    quantity: '0.01',
    participant_code: buyer,
  });
  return (await executeLiquidity(platform.client, quote.quote_id)).trade_id;
}

/** An accepted trade, and the clock then moved until its next step is overdue by the sweep's measure. */
async function overdueAcceptedTrade(): Promise<string> {
  const tradeId = await acceptedTrade();
  clock.advance(svc.runtime.config.settlement.activeAfterMs + SETTLEMENT_STALLED_AFTER_MS + 1);
  return tradeId;
}

test('an account creation whose job used up its attempts is given it again once stalled, and is created', async () => {
  const code = platform.platform.platform_code;
  const holder = (await svc.newParticipant(code)).participant_code;
  const accepted = await platform.client.send('POST', '/accounts', {
    body: { participant_code: holder, account_label: 'stalled', type: 'jtic', tier: 'pro', tenants: [] },
  });
  assert.equal(accepted.status, 202, JSON.stringify(accepted.body));
  const request = await svc.runtime.store.db
    .selectFrom('customer_account_requests')
    .select(['request_id', 'zrn'])
    .where('participant_code', '=', holder)
    .executeTakeFirstOrThrow();
  const key = `${ACCOUNT_TASKS.createCustomerAccount}:${request.request_id}`;
  await exhaust(key);
  const runner = accountsJobRunner(svc);
  try {
    await runner.run();
    const details = () => platform.client.send('GET', `/accounts/${request.zrn}/details`);
    assert.equal((await details()).status, 404, 'pending: its job is out of attempts');

    const revive = () =>
      svc.runtime.services.customerAccounts.reviveStalledCreations(CREATION_STALLED_AFTER_MS);
    assert.equal(await revive(), 0, 'not stalled yet');
    clock.advance(CREATION_STALLED_AFTER_MS + 1);
    assert.equal(await revive(), 1);
    assert.equal((await job(key))?.attempts, 0, 'its attempts afresh');
    await runner.run();
    assert.equal((await details()).status, 200, 'created');
    assert.equal(await revive(), 0, 'nothing stalled left');
  } finally {
    await runner.close();
  }
});

test('a session whose expiry job used up its attempts is given it again once stalled, and reported expired', async () => {
  const code = platform.platform.platform_code;
  const { code: participant } = await newAccountHolder(svc, code);
  const { code: depositor } = await newAccountHolder(svc, code);
  const stalled = await fundQuote(platform.client, { participant_code: participant, fund_asset: 'BTC.BTC' });
  const funded = await fundQuote(platform.client, { participant_code: depositor, fund_asset: 'BTC.BTC' });
  await recordDeposit(svc, {
    deposit_address: funded.deposit_address,
    quantity: '0.1',
    transaction_id: txId(),
  });
  for (const quote of [stalled, funded]) await exhaust(`funding-expiry:${quote.request_id}`);
  const revive = () => svc.runtime.services.funding.reviveStalledExpiries(EXPIRY_STALLED_AFTER_MS);
  clock.advance(svc.runtime.config.fundingSessionExpiryMs + EXPIRY_STALLED_AFTER_MS + 1);
  // The session with a deposit has nothing to report: left alone.
  assert.equal(await revive(), 1);
  assert.equal(
    (await job(`funding-expiry:${funded.request_id}`))?.attempts,
    10,
    'untouched: still out of attempts',
  );
  const runner = jobRunner(svc, fundingTaskList(svc.runtime.services.funding));
  try {
    await runner.run();
  } finally {
    await runner.close();
  }
  const events = await svc.runtime.store.db
    .selectFrom('fund_events')
    .select(['session_id', 'status_reason'])
    .where('kind', '=', 'session_expired')
    .where('session_id', 'in', [stalled.request_id, funded.request_id])
    .execute();
  assert.deepEqual(events, [
    { session_id: stalled.request_id, status_reason: 'deposit session has expired.' },
  ]);
  assert.equal(await revive(), 0, 'nothing stalled left');
});

test('an expiry job run before the expiry by the service clock waits for it, by the database clock', async () => {
  const code = platform.platform.platform_code;
  const { code: participant } = await newAccountHolder(svc, code);
  const quote = await fundQuote(platform.client, { participant_code: participant, fund_asset: 'BTC.BTC' });
  const remaining = svc.runtime.config.fundingSessionExpiryMs - 60_000;
  clock.advance(60_000);
  // As when the queue, by a database clock ahead of the service's, runs the job early.
  assert.equal(await svc.runtime.services.funding.expireSession(quote.request_id), null, 'not expired yet');
  const again = await job(`funding-expiry:${quote.request_id}`);
  assert.ok(again, 'its job is there again');
  // Due in what remains by the service's clock, counted from the database's now (± a few seconds of test).
  assert.ok(Math.abs(again.due_in_ms - remaining) < 5_000, `due in ${again.due_in_ms} ms, not ${remaining}`);
  clock.advance(remaining);
  const event = await svc.runtime.services.funding.expireSession(quote.request_id);
  assert.equal(event?.status_reason, 'deposit session has expired.');
});

test('a trade whose settlement job used up its attempts is given it again once overdue, and settles', async () => {
  const stuck = await acceptedTrade();
  await exhaust(`trade-settle:${stuck}`);
  const { activeAfterMs, terminateAfterMs } = svc.runtime.config.settlement;
  const revive = () => svc.runtime.services.trades.reviveStalledSettlements(SETTLEMENT_STALLED_AFTER_MS);
  clock.advance(activeAfterMs + SETTLEMENT_STALLED_AFTER_MS - 1);
  assert.equal(await revive(), 0, 'not overdue long enough yet');
  clock.advance(2);
  // A trade booked now is not due: left alone.
  const fresh = await acceptedTrade();
  assert.equal(await revive(), 1);
  assert.equal((await job(`trade-settle:${stuck}`))?.attempts, 0, 'its attempts afresh');
  const runner = jobRunner(svc, tradesTaskList(svc.runtime.services.trades));
  try {
    await runner.run();
    assert.equal((await getTrade(platform.client, stuck)).trade_state, 'active');
    assert.equal((await getTrade(platform.client, fresh)).trade_state, 'accepted');
    assert.equal(await revive(), 0, 'its next step is not overdue');
    // Its next job used up its attempts too: the active trade is revived once its settlement is overdue.
    await exhaust(`trade-settle:${stuck}`);
    clock.advance(terminateAfterMs + SETTLEMENT_STALLED_AFTER_MS + 1);
    // The fresh trade is overdue by then too, though its job is only waiting: it gets the job again, once.
    assert.equal(await revive(), 2);
    await runner.run();
    assert.equal((await getTrade(platform.client, stuck)).trade_state, 'terminated');
    assert.equal((await getTrade(platform.client, fresh)).trade_state, 'active');
  } finally {
    await runner.close();
  }
});

test('a trade found overdue whose own step runs meanwhile keeps the job of its next step', async () => {
  // Review: the sweep added the job of the state it had read, after the trade's late step had moved it on and
  // added the job of its next step; keyed, the stale job replaced that one and did nothing.
  const tradeId = await overdueAcceptedTrade();
  // Another instance's sweep, whose read of the overdue trades is held answered.
  const reads = holdingQueries(
    svc.runtime.store.db,
    (node) =>
      SelectQueryNode.is(node) &&
      !!node.from?.froms.some((from) => TableNode.is(from) && from.table.identifier.name === 'trades'),
  );
  const sweep = createTradesService(svc.domainDeps({ db: reads.db, clock })).reviveStalledSettlements(
    SETTLEMENT_STALLED_AFTER_MS,
  );
  await reads.reached;
  reads.stopHolding();
  assert.equal(
    await svc.runtime.services.trades.settleStep({ trade_id: tradeId, from: 'accepted' }),
    'active',
    'its late step',
  );
  reads.release();
  await sweep;
  const { rows } = await sql<{ payload: { from: string } }>`select payload
    from graphile_worker._private_jobs where key = ${`trade-settle:${tradeId}`}`.execute(
    svc.runtime.store.db,
  );
  assert.deepEqual(
    rows.map((row) => row.payload.from),
    ['active'],
  );
});

test('the settlement sweep passes over a trade whose row is held (a step moving it on), rather than wait for it', async () => {
  const tradeId = await overdueAcceptedTrade();
  const { db } = svc.runtime.store;
  const step = await heldTransaction(db, (trx) =>
    sql`select 1 from trades where trade_id = ${tradeId} for update`.execute(trx),
  );
  try {
    const sweep = svc.runtime.services.trades.reviveStalledSettlements(SETTLEMENT_STALLED_AFTER_MS);
    const waiting = async () => {
      for (;;) {
        const { rows } = await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity
          where datname = current_database() and wait_event_type = 'Lock' and state = 'active'`.execute(db);
        if (rows[0]!.n > 0) return 'waited for the row' as const;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    };
    assert.equal(await Promise.race([sweep.then(() => 'passed over' as const), waiting()]), 'passed over');
    const { rows } = await sql<{ n: number }>`select count(*)::int as n
      from graphile_worker._private_jobs where key = ${`trade-settle:${tradeId}`} and run_at <= now()`.execute(
      db,
    );
    assert.equal(rows[0]!.n, 0, 'its job was not added again');
  } finally {
    await step.release();
  }
});

test('a tenant change whose job used up its attempts is given it again once stalled, and takes effect', async () => {
  const code = platform.platform.platform_code;
  const { zrn } = await newAccountHolder(svc, code, 'joint');
  const tenant = (await svc.newParticipant(code)).participant_code;
  const added = await platform.client.send('POST', `/accounts/${encodeURIComponent(zrn)}/tenants`, {
    body: { participant_code: tenant },
  });
  assert.equal(added.status, 202, JSON.stringify(added.body));
  const key = `${ACCOUNT_TASKS.applyTenantChanges}:${zrn}`;
  await exhaust(key);
  const tenants = async () =>
    (
      await platform.client.request<{ message: { tenants: string[] } }>(
        'GET',
        `/accounts/${encodeURIComponent(zrn)}/details`,
      )
    ).message.tenants;
  const runner = accountsJobRunner(svc);
  try {
    await runner.run();
    assert.deepEqual(await tenants(), [], 'pending: its job is out of attempts');
    const revive = () => svc.runtime.services.tenants.reviveStalledChanges(CREATION_STALLED_AFTER_MS);
    assert.equal(await revive(), 0, 'not stalled yet');
    clock.advance(CREATION_STALLED_AFTER_MS + 1);
    assert.equal(await revive(), 1);
    assert.equal((await job(key))?.attempts, 0, 'its attempts afresh');
    await runner.run();
    assert.deepEqual(await tenants(), [tenant], 'in effect');
    assert.equal(await revive(), 0, 'nothing stalled left');
  } finally {
    await runner.close();
  }
});

test('the settlement sweep goes on where its last run stopped: older trades that cannot settle do not hold a newer one back', async () => {
  // Review: each run took the oldest overdue trades first, so a batch's worth that could not settle (a balance
  // corrected below what they need) was revived at every run, and a newer stalled trade never. Here a batch is two
  // trades, and none settles between runs (no job runs).
  const trades = [await acceptedTrade(), await acceptedTrade()];
  clock.advance(1);
  const newest = await acceptedTrade();
  for (const tradeId of [...trades, newest]) await exhaust(`trade-settle:${tradeId}`);
  clock.advance(svc.runtime.config.settlement.activeAfterMs + SETTLEMENT_STALLED_AFTER_MS + 1);
  const { rows } = await sql<{ n: number }>`select count(*)::int as n from trades
    where trade_state <> 'terminated'`.execute(svc.runtime.store.db);
  // Every unsettled trade of the file is overdue by now: enough runs of two to go round them all, and one more.
  const runs = Math.ceil(rows[0]!.n / 2) + 1;
  let revivedInRun = -1;
  for (let run = 1; run <= runs && revivedInRun === -1; run += 1) {
    assert.ok(
      (await svc.runtime.services.trades.reviveStalledSettlements(SETTLEMENT_STALLED_AFTER_MS, 2)) > 0,
    );
    if ((await job(`trade-settle:${newest}`))?.attempts === 0) revivedInRun = run;
  }
  assert.notEqual(revivedInRun, -1, `the newest trade was not revived in ${runs} runs of two`);
  for (const tradeId of trades) assert.equal((await job(`trade-settle:${tradeId}`))?.attempts, 0);
});
