import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { parseCronItems, type JobHelpers } from 'graphile-worker';
import pino from 'pino';
import { sql } from 'kysely';
import { PURGE_QUOTES_TASK, QUOTE_RETENTION_MS } from '../../src/domain/quotes/quotes.service.ts';
import { buildTaskList, cronItems } from '../../src/jobs/task-list.ts';
import { queueLogger } from '../../src/jobs/worker-runtime.ts';
import { ManualClock } from '../../src/lib/clock.ts';
import type { SvcClient } from '../../src/sdk/client.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import { executeLiquidity, fund, liquidityQuote, setPrices } from '../helpers/trades-fixtures.ts';

/**
 * Quotes that expired without being executed are purged QUOTE_RETENTION_MS after their expiry by an hourly
 * job; executed quotes stay with their trades. Every RFQ writes a quote: without the purge the table only grows.
 */
const clock = new ManualClock(Date.UTC(2026, 3, 1, 8, 0, 0));
let svc: TestService;
let client: SvcClient;
const DAY = 24 * 60 * 60_000;
const BUY = { side: 'buy', underlying: 'BTC', quoted_currency: 'USD', quantity: '0.001' } as const;

before(async () => {
  svc = await startTestService({ clock });
  await setPrices(svc, { 'BTC/USD': '65000' });
  const fixture = await svc.newPlatform();
  client = fixture.client;
  await fund(svc, fixture.platform.platform_code, 'USD', '1000000');
});
after(() => svc?.close());

async function quoteIds(): Promise<Set<string>> {
  const rows = await svc.runtime.store.db.selectFrom('quotes').select('quote_id').execute();
  return new Set(rows.map((r) => r.quote_id));
}

test('unexecuted quotes a day past their expiry are purged; executed and recent ones stay', async () => {
  const quotes = svc.runtime.appDeps!.services.quotes;
  const old = await liquidityQuote(client, BUY);
  const executed = await liquidityQuote(client, BUY);
  await executeLiquidity(client, executed.quote_id);
  clock.advance(QUOTE_RETENTION_MS - 60_000);
  const expiredRecently = await liquidityQuote(client, BUY);
  clock.advance(2 * 60_000); // `old` expired (30 s) more than a day ago; `expiredRecently` just now
  const fresh = await liquidityQuote(client, BUY);

  assert.equal(await quotes.purgeExpired(), 1);
  const left = await quoteIds();
  assert.equal(left.has(old.quote_id), false, 'the old unexecuted quote is purged');
  for (const kept of [executed, expiredRecently, fresh]) assert.ok(left.has(kept.quote_id), kept.quote_id);
  // The executed quote's trade still finds it.
  const trades = await client.send<{ message: Array<{ client_trade_id: string }> }>('GET', '/trades', {
    query: { client_trade_id: executed.quote_id },
  });
  assert.equal(trades.body.message.length, 1);
  assert.equal(trades.body.message[0]!.client_trade_id, executed.quote_id);

  clock.advance(DAY + 60_000);
  assert.equal(await quotes.purgeExpired(), 2);
  assert.deepEqual([...(await quoteIds())], [executed.quote_id]);
  assert.equal(await quotes.purgeExpired(), 0);
});

test('the purge says what it purged at info, where the queue’s own lines are debug', async () => {
  // Probe: the counts went to debug with graphile-worker's chatter, so an operator could not see retention run.
  const lines: Array<{ level: number; msg: string }> = [];
  const log = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  const logger = queueLogger(log).scope({ label: 'job', taskIdentifier: PURGE_QUOTES_TASK });
  await liquidityQuote(client, BUY);
  clock.advance(QUOTE_RETENTION_MS + 60_000);
  const purge = buildTaskList(svc.runtime.appDeps!.services)[PURGE_QUOTES_TASK]!;
  await purge({}, { logger } as unknown as JobHelpers);
  logger.info('Completed task 1 (quotes.purge_expired) with success');
  assert.deepEqual(
    lines.map((l) => [l.level, l.msg]),
    [
      [30, `${PURGE_QUOTES_TASK}: 1 expired quotes purged`],
      [20, 'Completed task 1 (quotes.purge_expired) with success'],
    ],
  );
});

test('more than one batch is purged in one run', async () => {
  const quotes = svc.runtime.appDeps!.services.quotes;
  // Written directly: 12,000 quotes through the API would take the test minutes.
  await sql`insert into quotes (quote_id, request_id, platform_code, kind, participant_code,
        owner_participant_code, account_label, side, underlying, quoted_currency, quantity, price, source_price,
        total_notional, asset_cost_notional, created_at, expire_at)
      select gen_random_uuid(), gen_random_uuid(), q.platform_code, q.kind, q.participant_code,
        q.owner_participant_code, q.account_label, q.side, q.underlying, q.quoted_currency, q.quantity, q.price,
        q.source_price, q.total_notional, q.asset_cost_notional, q.created_at, q.expire_at
      from quotes q, generate_series(1, 12000)
      where q.executed_at is not null
      limit 12000`.execute(svc.runtime.store.db);
  assert.equal(await quotes.purgeExpired(), 12_000);
  assert.equal((await quoteIds()).size, 1);
});

test('the purge is an hourly cron item of the worker, run serially, and its task is in the task list', () => {
  const item = cronItems.find((c) => c.task === PURGE_QUOTES_TASK);
  assert.ok(item, 'no cron item for the purge');
  assert.equal(item.match, '17 * * * *');
  // In a queue of its own: a run that outlasts the hour is not joined by the next one.
  assert.equal(item.options?.queueName, PURGE_QUOTES_TASK);
  assert.equal(parseCronItems(cronItems).length, cronItems.length);
  const tasks = buildTaskList(svc.runtime.appDeps!.services);
  for (const c of cronItems) assert.equal(typeof tasks[c.task], 'function', c.task);
});
