import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { ConvertWithdrawQuote } from '../../src/contract/quotes.schemas.ts';
import type { AdminTrade } from '../../src/contract/trades.schemas.ts';
import { ManualClock } from '../../src/lib/clock.ts';
import type { SvcClient } from '../../src/sdk/client.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import {
  balanceOf,
  convertWithdrawQuote,
  executeConvertWithdraw,
  fund,
  getTrade,
  liquidityQuote,
  setPrices,
  tradesByClientTradeId,
} from '../helpers/trades-fixtures.ts';
import { assertVendorSchema } from '../helpers/vendor-schema.ts';

/**
 * Issue 7 point 4: convert and withdraw. A quote to buy an asset and send it to an address; executing it
 * books a trade and a withdrawal request; when the trade settles the bought asset arrives and leaves with
 * the withdrawal, in the same transaction. Same at-most-one and 404 rules as liquidity quotes.
 */
const clock = new ManualClock(Date.now());
let svc: TestService;
let platformCode: string;
let client: SvcClient;
let buyer: string;
const ADDRESS = '0x52908400098527886E0F7030069857D2E4169EE7';

before(async () => {
  svc = await startTestService({
    clock,
    env: { SVC_SETTLEMENT_ACTIVE_AFTER_MS: '3600000', SVC_SETTLEMENT_TERMINATE_AFTER_MS: '3600000' },
  });
  await setPrices(svc, { 'USDC/USD': '1.0001', 'BTC/USD': '60000' });
  const fixture = await svc.newPlatform();
  platformCode = fixture.platform.platform_code;
  client = fixture.client;
  buyer = (await svc.newParticipant(platformCode)).participant_code;
  await fund(svc, buyer, 'USD', '1000');
});
after(() => svc?.close());

const cwBody = (extra: Record<string, unknown> = {}) => ({
  side: 'buy',
  underlying: 'USDC.ETH',
  quoted_currency: 'USD',
  withdrawal_address: ADDRESS,
  participant_code: buyer,
  ...extra,
});

test('GET and POST /convert_withdraw/rfq answer the vendor CW quote, priced from the asset without its network', async () => {
  const got = await client.send<{ message: ConvertWithdrawQuote }>('GET', '/convert_withdraw/rfq', {
    query: cwBody({ quantity: '100', no_destination_tag: true }),
  });
  assert.equal(got.status, 200, JSON.stringify(got.body));
  assertVendorSchema(got.body, 'GetRequestForCWQuoteResponse');
  assert.equal(got.body.message.price, '1.0001');
  assert.equal(got.body.message.total_notional, '100.01');
  assert.equal(got.body.message.withdrawal_address, ADDRESS);
  assert.equal(got.body.message.network_fee_notional, '0');
  assert.equal(got.body.message.expire_ts, clock.now() + 30_000);

  const posted = await client.send<{ message: ConvertWithdrawQuote }>('POST', '/convert_withdraw/rfq', {
    body: cwBody({ total: '50' }),
  });
  assert.equal(posted.status, 201, JSON.stringify(posted.body));
  assertVendorSchema(posted.body, 'GetRequestForCWQuoteResponse');
  assert.equal(posted.body.message.quantity, '49.995000499950004999');
});

test('bad requests name each field: address missing, sell side, tag with no_destination_tag', async () => {
  const res = await client.send<{ errors: string[] }>('POST', '/convert_withdraw/rfq', {
    body: { side: 'buy', underlying: 'USDC.ETH', quoted_currency: 'USD', quantity: '1' },
  });
  assert.equal(res.status, 400);
  assert.deepEqual(res.body.errors, ['withdrawal_address: is required']);
  // No network's address holds a space, a control character or non-ASCII text (a blank was booked: review).
  for (const address of [' ', '0x12 34', '😀', 'addr\u0000']) {
    for (const [method, request] of [
      ['POST', { body: cwBody({ withdrawal_address: address }) }],
      ['GET', { query: cwBody({ withdrawal_address: address }) }],
    ] as const) {
      const refused = await client.send<{ errors: string[] }>(method, '/convert_withdraw/rfq', request);
      assert.equal(refused.status, 400, `${method} ${JSON.stringify(address)}`);
      assert.ok(
        refused.body.errors.some((e) => e.startsWith('withdrawal_address:')),
        JSON.stringify(refused.body),
      );
    }
  }
  // Nor a tag or memo that prints as nothing, or as another (review: a tab and a right-to-left override were booked).
  for (const tag of [' ', '\t', '\n', '\u202e123', '12 ', 'memo\u200b']) {
    for (const [method, request] of [
      ['POST', { body: cwBody({ quantity: '1', destination_tag: tag }) }],
      ['GET', { query: cwBody({ quantity: '1', destination_tag: tag }) }],
    ] as const) {
      const refused = await client.send<{ errors: string[] }>(method, '/convert_withdraw/rfq', request);
      assert.equal(refused.status, 400, `${method} ${JSON.stringify(tag)}`);
      assert.deepEqual(refused.body.errors, [
        'destination_tag: is not in the expected form (no control or invisible characters, no space at either end)',
      ]);
    }
  }
  for (const tag of ['123456789', 'memo text 1', 'Überweisung']) {
    const taken = await client.send<{ message: ConvertWithdrawQuote }>('POST', '/convert_withdraw/rfq', {
      body: cwBody({ quantity: '1', destination_tag: tag }),
    });
    assert.equal(taken.status, 201, `${JSON.stringify(tag)}: ${JSON.stringify(taken.body)}`);
  }
  const rules = await client.send<{ errors: string[] }>('POST', '/convert_withdraw/rfq', {
    body: cwBody({ side: 'sell', quantity: '1', destination_tag: '123', no_destination_tag: true }),
  });
  assert.equal(rules.status, 400);
  assert.deepEqual(rules.body.errors.map((e) => e.split(':')[0]).sort(), ['destination_tag', 'side']);
});

test('execute books a trade and a withdrawal request; settling debits the withdrawal with the trade', async () => {
  const quote = await convertWithdrawQuote(client, cwBody({ quantity: '100' }));
  const res = await client.send<{ message: { trade_id: string; withdrawal_request_id: string } }>(
    'POST',
    '/convert_withdraw/execute',
    { body: { quote_id: quote.quote_id } },
  );
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assertVendorSchema(res.body, 'PostCWExecuteQuoteResponse');
  const { trade_id: tradeId, withdrawal_request_id: withdrawalId } = res.body.message;
  assert.match(withdrawalId, /^[0-9a-f-]{36}$/);

  const trade = await getTrade(client, tradeId);
  assert.equal(trade.client_trade_id, quote.quote_id);
  assert.equal(trade.network_fee_notional, '0');
  assertVendorSchema({ message: trade }, 'GetTradeResponse');
  const withdrawal = await svc.runtime.store.db
    .selectFrom('withdrawal_requests')
    .selectAll()
    .where('withdrawal_request_id', '=', withdrawalId)
    .executeTakeFirstOrThrow();
  assert.equal(withdrawal.trade_id, tradeId);
  assert.equal(withdrawal.status, 'pending');
  assert.equal(String(withdrawal.quantity), '100');
  assert.equal(withdrawal.asset, 'USDC');
  assert.equal(withdrawal.withdrawal_address, ADDRESS);

  const active = await svc.admin.post<AdminTrade>(`/trades/${tradeId}/advance`);
  assert.equal(active.withdrawal_request_id, withdrawalId);
  assert.equal(await balanceOf(svc, buyer, 'USD'), '1000');
  await svc.admin.post(`/trades/${tradeId}/advance`);
  // Paid 100.01 USD; 100 USDC arrived and left with the withdrawal.
  assert.equal(await balanceOf(svc, buyer, 'USD'), '899.99');
  assert.equal(await balanceOf(svc, buyer, 'USDC'), '0');
  const movements = await svc.runtime.store.db
    .selectFrom('balance_movements')
    .innerJoin('balance_accounts', 'balance_accounts.account_id', 'balance_movements.account_id')
    .select(['balance_accounts.asset', 'balance_movements.change', 'balance_movements.movement_type'])
    .where('balance_movements.run_id', 'in', [tradeId, withdrawalId])
    .execute();
  assert.deepEqual(movements.map((m) => [m.asset, String(m.change), m.movement_type]).sort(), [
    ['USD', '-100.01', 'final_settlement'],
    ['USDC', '-100', 'withdrawal_confirmed'],
    ['USDC', '100', 'final_settlement'],
  ]);
  const settled = await svc.runtime.store.db
    .selectFrom('withdrawal_requests')
    .select(['status', 'settled_at'])
    .where('withdrawal_request_id', '=', withdrawalId)
    .executeTakeFirstOrThrow();
  assert.equal(settled.status, 'settled');
  assert.ok(settled.settled_at instanceof Date);
});

test('at most one trade per quote; unknown, expired, executed and liquidity quotes → 404', async () => {
  const quote = await convertWithdrawQuote(client, cwBody({ quantity: '1' }));
  const answers = await Promise.all(
    Array.from({ length: 20 }, () =>
      client.send('POST', '/convert_withdraw/execute', { body: { quote_id: quote.quote_id } }),
    ),
  );
  assert.deepEqual(answers.map((a) => a.status).sort(), [200, ...Array<number>(19).fill(404)]);
  assert.equal((await tradesByClientTradeId(client, quote.quote_id)).length, 1);

  const liquidity = await liquidityQuote(client, {
    side: 'buy',
    underlying: 'BTC',
    quoted_currency: 'USD',
    quantity: '0.0001',
  });
  const expired = await convertWithdrawQuote(client, cwBody({ quantity: '1' }));
  clock.advance(30_000);
  for (const quoteId of [liquidity.quote_id, expired.quote_id, '5a0f7c2e-4444-4444-8444-444444444444']) {
    const res = await client.send('POST', '/convert_withdraw/execute', { body: { quote_id: quoteId } });
    assert.equal(res.status, 404);
    assert.deepEqual(res.body, { error: 'Not Found' });
  }
  assert.deepEqual(await tradesByClientTradeId(client, expired.quote_id), []);
});

test('insufficient balance → 400 and no withdrawal request', async () => {
  const poor = (await svc.newParticipant(platformCode)).participant_code;
  const quote = await convertWithdrawQuote(client, cwBody({ quantity: '1', participant_code: poor }));
  const res = await client.send<{ errors: string[] }>('POST', '/convert_withdraw/execute', {
    body: { quote_id: quote.quote_id },
  });
  assert.equal(res.status, 400);
  assert.match(res.body.errors[0]!, /^quote_id: insufficient balance/);
  const requests = await svc.runtime.store.db
    .selectFrom('withdrawal_requests')
    .select('withdrawal_request_id')
    .where('participant_code', '=', poor)
    .execute();
  assert.deepEqual(requests, []);
  await fund(svc, poor, 'USD', '1.0001');
  assert.ok((await executeConvertWithdraw(client, quote.quote_id)).withdrawal_request_id);
});
