import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { AdminApiError } from '../../src/cli/admin-client.ts';
import type { AdminTrade, Trade } from '../../src/contract/trades.schemas.ts';
import { ManualClock } from '../../src/lib/clock.ts';
import type { SvcClient } from '../../src/sdk/client.ts';
import { assertOtherPlatformForbidden } from '../helpers/ownership.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import { executeLiquidity, fund, liquidityQuote, setPrices } from '../helpers/trades-fixtures.ts';
import { assertVendorSchema } from '../helpers/vendor-schema.ts';

/**
 * Issue 7 point 5: `GET /trades` (the vendor's filters, pagination) and `GET /trades/{trade_id}`, in the
 * vendor's shapes and scoped to the calling platform (another platform's trade → 403, wire-contract §9).
 */
const START = Date.UTC(2026, 0, 5, 12);
const clock = new ManualClock(START);
let svc: TestService;
let platformCode: string;
let client: SvcClient;
let other: SvcClient;
let alice: string;
let bob: string;
/** Trades made at START + i minutes, i = 0..4: alice general ×3, bob general, alice savings. */
const made: Array<{ tradeId: string; quoteId: string; at: number }> = [];

type Page = { message: Trade[]; page: number; page_size: number; total_pages: number; count: number };

async function list(query: Record<string, string | number>): Promise<Page> {
  const res = await client.send<Page>('GET', '/trades', { query });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assertVendorSchema(res.body, 'GetTradesResponse');
  return res.body;
}

before(async () => {
  svc = await startTestService({ clock });
  await setPrices(svc, { 'BTC/USD': '40000' });
  const fixture = await svc.newPlatform();
  platformCode = fixture.platform.platform_code;
  client = fixture.client;
  other = (await svc.newPlatform()).client;
  alice = (await svc.newParticipant(platformCode)).participant_code;
  bob = (await svc.newParticipant(platformCode)).participant_code;
  for (const [who, label] of [
    [alice, 'general'],
    [bob, 'general'],
    [alice, 'savings'],
  ] as const) {
    await fund(svc, who, 'USD', '1000000', label);
  }
  const plan = [
    [alice, 'general'],
    [alice, 'general'],
    [alice, 'general'],
    [bob, 'general'],
    [alice, 'savings'],
  ] as const;
  for (const [i, [who, label]] of plan.entries()) {
    clock.set(START + i * 60_000);
    const quote = await liquidityQuote(client, {
      side: 'buy',
      underlying: 'BTC',
      quoted_currency: 'USD',
      quantity: '0.01',
      participant_code: who,
      account_label: label,
    });
    const { trade_id: tradeId } = await executeLiquidity(client, quote.quote_id);
    made.push({ tradeId, quoteId: quote.quote_id, at: clock.now() });
  }
  await svc.admin.post<AdminTrade>(`/trades/${made[0]!.tradeId}/advance`);
  await svc.admin.post<AdminTrade>(`/trades/${made[1]!.tradeId}/advance`);
  await svc.admin.post<AdminTrade>(`/trades/${made[1]!.tradeId}/advance`);
  // A trade of another platform, which no filter may reveal.
  await fund(svc, (await svc.newPlatform()).platform.platform_code, 'USD', '1');
});
after(() => svc?.close());

test('GET /trades/{trade_id} answers the vendor shape; an unknown id → 404', async () => {
  const res = await client.send<{ message: Trade }>('GET', `/trades/${made[0]!.tradeId}`);
  assert.equal(res.status, 200);
  assertVendorSchema(res.body, 'GetTradeResponse');
  assert.equal(res.body.message.trade_state, 'active');
  assert.equal(res.body.message.transaction_timestamp, START);
  assert.equal(res.body.message.platform_code, platformCode);
  for (const id of ['3e4f5a6b-5555-4555-8555-555555555555', 'not-a-trade']) {
    const missing = await client.send('GET', `/trades/${id}`);
    assert.equal(missing.status, 404);
    assert.deepEqual(missing.body, { error: 'Not Found' });
  }
});

test("GET /admin/trades/{trade_id}: any platform's trade as the operator's calls answer it; unknown → 404 saying so", async () => {
  const shown = await svc.admin.get<AdminTrade>(`/trades/${made[1]!.tradeId}`);
  const viaPlatform = (await client.send<{ message: Trade }>('GET', `/trades/${made[1]!.tradeId}`)).body
    .message;
  assert.equal(shown.trade_state, 'terminated');
  assert.equal(shown.net_settlement, false);
  assert.equal(shown.withdrawal_request_id, null);
  // The platform's view, with the operator's fields added.
  const { net_settlement: _net, withdrawal_request_id: _withdrawal, ...asPlatformSees } = shown;
  assert.deepEqual(asPlatformSees, viaPlatform);
  for (const id of ['3e4f5a6b-5555-4555-8555-555555555555', 'not-a-trade'])
    await assert.rejects(svc.admin.get(`/trades/${id}`), (error: AdminApiError) => {
      assert.equal(error.status, 404);
      assert.match(JSON.stringify(error.body), new RegExp(`trade ${id} not found`));
      return true;
    });
});

test("GET /admin/trades: a platform's trades, newest first, by party, state or client_trade_id (a quote id too)", async () => {
  type AdminPage = {
    message: AdminTrade[];
    page: number;
    page_size: number;
    total_pages: number;
    count: number;
  };
  const list = async (query: string) => {
    const res = await svc.operatorCall('GET', `/trades?platform_code=${platformCode}${query}`);
    assert.equal(res.status, 200, res.text);
    return res.json as AdminPage;
  };
  const ids = (page: AdminPage) => page.message.map((t) => t.trade_id);
  const newestFirst = made.map((m) => m.tradeId).reverse();
  assert.deepEqual(ids(await list('')), newestFirst);
  assert.deepEqual(ids(await list(`&participant_code=${bob}`)), [made[3]!.tradeId]);
  assert.deepEqual(ids(await list('&trade_state=terminated')), [made[1]!.tradeId]);
  // Support is given the quote id: it finds the trade of that quote.
  assert.deepEqual(ids(await list(`&client_trade_id=${made[2]!.quoteId}`)), [made[2]!.tradeId]);
  const second = await list('&page=2&page_size=2');
  assert.deepEqual([ids(second), second.count, second.total_pages], [newestFirst.slice(2, 4), 5, 3]);
  const unknown = await svc.operatorCall('GET', '/trades?platform_code=ZZZZZ9');
  assert.equal(unknown.status, 404, unknown.text);
  assert.match(unknown.text, /platform ZZZZZ9 not found/);
  const missing = await svc.operatorCall('GET', '/trades');
  assert.equal(missing.status, 400, missing.text);
  assert.match(missing.text, /platform_code/);
  // A quote's id given as a trade's: the 404 names the trade.
  await assert.rejects(svc.admin.get(`/trades/${made[2]!.quoteId}`), (error: AdminApiError) => {
    assert.equal(error.status, 404);
    assert.match(
      JSON.stringify(error.body),
      new RegExp(`that is the id of the quote of trade ${made[2]!.tradeId}`),
    );
    return true;
  });
});

test("another platform's trade → 403 (and its own platform still reads it)", async () => {
  await assertOtherPlatformForbidden(
    { method: 'GET', path: `/trades/${made[0]!.tradeId}` },
    { owner: client, other },
  );
});

test("a party filter naming another platform's participant → 403, as the other lists answer", async () => {
  // It was an empty 200 here while /fund/transactions and /accounts answered 403 (review).
  for (const filter of ['party_code', 'participant_code']) {
    const res = await other.send('GET', '/trades', { query: { [filter]: alice } });
    assert.equal(res.status, 403, `${filter}: ${res.status}`);
  }
  // Whatever else the query says (two states no trade is in at once answered an empty page first).
  const conflicting = await other.send('GET', '/trades', {
    query: { party_code: alice, trade_state: 'accepted', settlement_state: 'settled' },
  });
  assert.equal(conflicting.status, 403);
  // The house liquidity provider, every trade's counterparty, is no platform's: it filters.
  const house = await client.send<Page>('GET', '/trades', { query: { party_code: 'SVCLQD' } });
  assert.equal(house.status, 200);
  assert.equal(house.body.message.length, 5);
  // An unknown code matches nothing.
  const none = await client.send<Page>('GET', '/trades', { query: { party_code: 'ZZZZZ9' } });
  assert.deepEqual(none.body.message, []);
});

test('lists newest first and pages with page, page_size, total_pages and count', async () => {
  const all = await list({});
  assert.deepEqual(
    all.message.map((t) => t.trade_id),
    made.map((m) => m.tradeId).reverse(),
  );
  assert.equal(all.count, 5);
  assert.equal(all.page_size, 50);
  const second = await list({ page: 2, page_size: 2 });
  assert.deepEqual(
    { page: second.page, page_size: second.page_size, total_pages: second.total_pages, count: second.count },
    { page: 2, page_size: 2, total_pages: 3, count: 5 },
  );
  assert.deepEqual(
    second.message.map((t) => t.trade_id),
    [made[2]!.tradeId, made[1]!.tradeId],
  );
  assert.deepEqual((await list({ page: 4, page_size: 2 })).message, []);
  assert.deepEqual((await other.send<Page>('GET', '/trades')).body.message, []);
});

test('filters: client_trade_id, trade_state, settlement_state, account_label, party_code, platform_code, participant_code, asset, underlying', async () => {
  const ids = async (query: Record<string, string | number>) =>
    (await list(query)).message.map((t) => t.trade_id);
  assert.deepEqual(await ids({ client_trade_id: made[3]!.quoteId }), [made[3]!.tradeId]);
  assert.deepEqual(await ids({ client_trade_id: 'nothing-like-it' }), []);
  assert.deepEqual(await ids({ trade_state: 'active' }), [made[0]!.tradeId]);
  assert.deepEqual(await ids({ trade_state: 'terminated' }), [made[1]!.tradeId]);
  assert.deepEqual(await ids({ settlement_state: 'settled' }), [made[1]!.tradeId]);
  assert.deepEqual(await ids({ settlement_state: 'obligations_outstanding' }), [made[0]!.tradeId]);
  assert.deepEqual(await ids({ settlement_state: 'defaulted' }), []);
  assert.deepEqual(await ids({ account_label: 'savings' }), [made[4]!.tradeId]);
  assert.deepEqual(await ids({ party_code: bob }), [made[3]!.tradeId]);
  assert.equal((await ids({ party_code: alice })).length, 4);
  // participant_code, asset and underlying: named by the vendor's description of the list (they were a 400).
  assert.deepEqual(await ids({ participant_code: bob }), [made[3]!.tradeId]);
  assert.deepEqual(await ids({ participant_code: bob, party_code: alice }), []);
  assert.equal((await ids({ underlying: 'BTC' })).length, 5);
  assert.deepEqual(await ids({ underlying: 'ETH' }), []);
  assert.equal((await ids({ asset: 'USD' })).length, 5);
  assert.equal((await ids({ asset: 'BTC', participant_code: alice })).length, 4);
  assert.deepEqual(await ids({ asset: 'EUR' }), []);
  assert.equal((await ids({ platform_code: platformCode })).length, 5);
  assert.deepEqual(await ids({ platform_code: 'ABCDEF' }), []);
  assert.deepEqual(await ids({ market_identifier_code: 'XNAS' }), []);
  // The other platform cannot find ours by its client_trade_id either.
  assert.deepEqual(
    (await other.send<Page>('GET', '/trades', { query: { client_trade_id: made[3]!.quoteId } })).body.message,
    [],
  );
});

test('transaction_timestamp ranges, in milliseconds or nanoseconds', async () => {
  const ids = async (query: Record<string, string | number>) =>
    (await list(query)).message.map((t) => t.trade_id);
  const at = (i: number) => made[i]!.at;
  assert.deepEqual(await ids({ 'transaction_timestamp[gte]': at(3) }), [made[4]!.tradeId, made[3]!.tradeId]);
  assert.deepEqual(await ids({ 'transaction_timestamp[gt]': at(3) }), [made[4]!.tradeId]);
  assert.deepEqual(await ids({ 'transaction_timestamp[lt]': at(1) }), [made[0]!.tradeId]);
  assert.deepEqual(await ids({ 'transaction_timestamp[lte]': at(1), 'transaction_timestamp[gt]': at(0) }), [
    made[1]!.tradeId,
  ]);
  assert.deepEqual(await ids({ 'transaction_timestamp[e]': at(2) }), [made[2]!.tradeId]);
  assert.deepEqual(await ids({ 'transaction_timestamp[e]': `${at(2)}000000` }), [made[2]!.tradeId]);
  // Beyond 2^53, exactly: half a millisecond after trade 2 is after it and before trade 3.
  const half = `${at(2)}500000`;
  assert.deepEqual(await ids({ 'transaction_timestamp[gte]': half }), [made[4]!.tradeId, made[3]!.tradeId]);
  assert.deepEqual(
    await ids({ 'transaction_timestamp[lte]': half, 'transaction_timestamp[gt]': `${at(1)}000000` }),
    [made[2]!.tradeId],
  );
  assert.deepEqual(await ids({ 'transaction_timestamp[e]': half }), []);
  // Milliseconds with a fraction (the vendor types the filter a number: `time.time() * 1000` in Python).
  const fraction = `${at(2)}.25`;
  assert.deepEqual(await ids({ 'transaction_timestamp[gte]': fraction }), [
    made[4]!.tradeId,
    made[3]!.tradeId,
  ]);
  assert.deepEqual(
    await ids({ 'transaction_timestamp[lte]': fraction, 'transaction_timestamp[gt]': `${at(1)}.999` }),
    [made[2]!.tradeId],
  );
  assert.deepEqual(await ids({ 'transaction_timestamp[e]': fraction }), []);
  assert.deepEqual(await ids({ 'transaction_timestamp[e]': `${at(2)}.000` }), [made[2]!.tradeId]);
  // With an exponent, as Python and JavaScript print a float of nanoseconds (`1.7953446824844147e+18`):
  // refused before (review). Read exactly: trade 2's millisecond and a quarter of one, in nanoseconds.
  const digits = `${at(2)}250000`;
  const exponent = `${digits[0]}.${digits.slice(1)}e+${digits.length - 1}`;
  assert.deepEqual(await ids({ 'transaction_timestamp[gte]': exponent }), [
    made[4]!.tradeId,
    made[3]!.tradeId,
  ]);
  assert.deepEqual(await ids({ 'transaction_timestamp[lt]': exponent.toUpperCase().replace('+', '') }), [
    made[2]!.tradeId,
    made[1]!.tradeId,
    made[0]!.tradeId,
  ]);
  // An exponent that says more than 20 digits: a 400 naming the filter, not a date out of range.
  const huge = await client.send<{ errors: string[] }>('GET', '/trades', {
    query: { 'transaction_timestamp[gt]': '9.9e99' },
  });
  assert.equal(huge.status, 400);
  assert.ok(
    huge.body.errors.some((e) => e.startsWith('transaction_timestamp[gt]:')),
    JSON.stringify(huge.body),
  );
});

test('a bad filter → 400 naming it; page_size above 100 → 400', async () => {
  const res = await client.send<{ errors: string[] }>('GET', '/trades', {
    query: {
      trade_state: 'settled',
      page: 0,
      page_size: 101,
      'transaction_timestamp[gt]': 'yesterday',
      colour: 'red',
    },
  });
  assert.equal(res.status, 400);
  assert.deepEqual(res.body.errors.map((e) => e.split(':')[0]).sort(), [
    'colour',
    'page',
    'page_size',
    'trade_state',
    'transaction_timestamp[gt]',
  ]);
});
