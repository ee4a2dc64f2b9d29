import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import type { AdminApiError } from '../../src/cli/admin-client.ts';
import type { IssuedApiKey, Platform } from '../../src/contract/admin.schemas.ts';
import type { LiquidityQuote, RequestedLiquidityQuote } from '../../src/contract/quotes.schemas.ts';
import { ManualClock } from '../../src/lib/clock.ts';
import type { Runtime } from '../../src/main/runtime.ts';
import { SvcClient } from '../../src/sdk/client.ts';
import { startInstance } from '../helpers/instance.ts';
import { LOOPBACK, startTestService, type TestService } from '../helpers/test-service.ts';
import {
  balanceOf,
  eventually,
  executeLiquidity,
  fund,
  getTrade,
  liquidityQuote,
  setPrices,
  tradesByClientTradeId,
} from '../helpers/trades-fixtures.ts';
import { assertVendorSchema } from '../helpers/vendor-schema.ts';

/**
 * Issue 7 points 1–3 and 9: liquidity quotes priced from the operator's price source, their expiry, and
 * execution into at most one trade (wire-contract §7, spec 7.2).
 */
const clock = new ManualClock(Date.now());
let svc: TestService;
let platformCode: string;
let client: SvcClient;
let customer: string;

const BTC_USD = '65000.25';
const ACCOUNT_ACTIONS = { side: 'buy', underlying: 'BTC', quoted_currency: 'USD' } as const;

before(async () => {
  svc = await startTestService({ clock });
  await setPrices(svc, { 'BTC/USD': BTC_USD, 'ETH/USD': '3', 'XDC/USD': '98765432.123456789' });
  const fixture = await svc.newPlatform();
  platformCode = fixture.platform.platform_code;
  client = fixture.client;
  customer = (await svc.newParticipant(platformCode)).participant_code;
  await fund(svc, customer, 'USD', '10000000');
  await fund(svc, platformCode, 'USD', '10000000');
});
after(() => svc?.close());

async function expectNotFound(quoteId: string, path = '/liquidity/execute', by = client) {
  const res = await by.send('POST', path, { body: { quote_id: quoteId } });
  assert.equal(res.status, 404, `${path} ${quoteId}: ${res.status} ${JSON.stringify(res.body)}`);
  assert.deepEqual(res.body, { error: 'Not Found' });
}

async function platformClient(body: Record<string, unknown>): Promise<{ code: string; client: SvcClient }> {
  const platform = await svc.admin.post<Platform>('/platforms', { ip_allowlist: LOOPBACK, ...body });
  const key = await svc.admin.post<IssuedApiKey>(`/platforms/${platform.platform_code}/api_keys`);
  return {
    code: platform.platform_code,
    client: new SvcClient({
      baseUrl: svc.url,
      apiKey: key.api_key,
      apiSecret: key.api_secret,
      passphrase: key.passphrase,
      now: () => clock.now(),
    }),
  };
}

describe('liquidity quotes', () => {
  test('GET /liquidity/rfq prices a quantity from the price source and expires after the default 30 s', async () => {
    const res = await client.send<{ message: LiquidityQuote }>('GET', '/liquidity/rfq', {
      query: { ...ACCOUNT_ACTIONS, quantity: '2', participant_code: customer },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assertVendorSchema(res.body, 'GetRequestForQuoteResponse');
    const quote = res.body.message;
    assert.equal(quote.price, BTC_USD);
    assert.equal(quote.quantity, '2');
    assert.equal(quote.total_notional, '130000.5');
    assert.equal(quote.side, 'buy');
    assert.equal(quote.underlying, 'BTC');
    assert.equal(quote.quoted_currency, 'USD');
    assert.equal(quote.participant_code, customer);
    assert.equal(quote.account_label, 'general');
    assert.equal(quote.account_group, platformCode);
    assert.deepEqual(quote.obo_participant, {
      participant_code: customer,
      account_group: platformCode,
      account_label: 'general',
    });
    assert.match(quote.quote_id, /^[0-9a-f-]{36}$/);
    assert.equal(quote.expire_ts, clock.now() + 30_000);
    // The vendor returns these as null: no settlement override, no issuer fee (probe: they were left out).
    for (const field of [
      'settlement_type',
      'issuer_fee_payor_type',
      'issuer_fee_rate',
      'issuer_fee_amount',
    ]) {
      assert.ok(field in quote, field);
      assert.equal((quote as Record<string, unknown>)[field], null, field);
    }
  });

  test('POST /liquidity/rfq answers 201; by total it buys what the total pays for, rounded down', async () => {
    const res = await client.send<{ message: RequestedLiquidityQuote }>('POST', '/liquidity/rfq', {
      body: {
        side: 'buy',
        underlying: 'ETH',
        quoted_currency: 'USD',
        total: '100',
        participant_code: customer,
      },
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assertVendorSchema(res.body, 'PostRequestForQuoteResponse');
    assert.equal(res.body.message.quantity, '33.333333333333333333');
    assert.equal(res.body.message.total_notional, '100');
    assert.equal(res.body.message.settlement_type, null);
    assert.equal(res.body.message.issuer_fee_rate, null);
    // A settlement named is echoed, as the vendor's quote with a settlement override is.
    const settled = await client.send<{ message: RequestedLiquidityQuote }>('POST', '/liquidity/rfq', {
      body: { ...ACCOUNT_ACTIONS, quantity: '1', participant_code: customer, settlement_type: 'STANDARD' },
    });
    assert.equal(settled.status, 201, JSON.stringify(settled.body));
    assertVendorSchema(settled.body, 'PostRequestForQuoteResponse');
    assert.equal(settled.body.message.settlement_type, 'STANDARD');
  });

  test('a spread moves the price in the house’s favour on each side and is reported', async () => {
    const buy = await liquidityQuote(client, { ...ACCOUNT_ACTIONS, quantity: '1', spread: '100' });
    assert.equal(buy.price, '65650.2525');
    assert.equal(buy.spread_bps, '100');
    assert.equal(buy.spread_notional, '650.0025');
    const sell = await liquidityQuote(client, {
      ...ACCOUNT_ACTIONS,
      side: 'sell',
      quantity: '1',
      spread: '100',
    });
    assert.equal(sell.price, '64350.2475');
    assert.equal(sell.total_notional, '64350.2475');
    assert.equal(sell.spread_notional, '650.0025');
  });

  test('without a spread, nothing is reported as spread: a quote by total says 0 and its trade null', async () => {
    // By total the quantity is rounded down (100 / 65000.25 = 0.00153845562132453…): that rounding is not a
    // spread.
    const quote = await liquidityQuote(client, { ...ACCOUNT_ACTIONS, total: '100' });
    assert.equal(quote.spread_bps, '0');
    assert.equal(quote.spread_notional, '0');
    const trade = await getTrade(client, (await executeLiquidity(client, quote.quote_id)).trade_id);
    // The vendor's TradeResponseEntity: "Returns null when no spread applied".
    assert.equal(trade.spread_notional, null);
    assert.equal(trade.spread_bps, null);

    const spread = await liquidityQuote(client, { ...ACCOUNT_ACTIONS, total: '100', spread: '100' });
    assert.equal(spread.price, '65650.2525');
    // The quantity at the price less the quantity at the source price, rounded up (100 less the quantity at
    // the source price, as before, also counted the quantity's rounding: 0.990099009900992492).
    const expected = '0.990099009900990076';
    assert.equal(spread.quantity, '0.001523223387450033');
    assert.equal(spread.spread_notional, expected);
    const spreadTrade = await getTrade(client, (await executeLiquidity(client, spread.quote_id)).trade_id);
    assert.equal(spreadTrade.spread_bps, '100');
    assert.equal(spreadTrade.spread_notional, expected);
  });

  test('without participant_code the platform quotes for itself', async () => {
    const quote = await liquidityQuote(client, { ...ACCOUNT_ACTIONS, quantity: '1' });
    assert.equal(quote.participant_code, platformCode);
    assert.equal(quote.obo_participant.participant_code, platformCode);
  });

  test("a platform's own quote_expiry_ms sets expire_ts", async () => {
    const own = await platformClient({ name: 'Short quotes', quote_expiry_ms: 5_000 });
    const quote = await liquidityQuote(own.client, { ...ACCOUNT_ACTIONS, quantity: '1' });
    assert.equal(quote.expire_ts, clock.now() + 5_000);
  });

  test('HEAD does not make a quote: the GET RFQs have no HEAD route', async () => {
    const quotes = async () =>
      Number(
        (
          await svc.runtime.store.db
            .selectFrom('quotes')
            .select((eb) => eb.fn.countAll().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      );
    const before = await quotes();
    for (const [path, query] of [
      ['/liquidity/rfq', { ...ACCOUNT_ACTIONS, quantity: '1' }],
      ['/convert_withdraw/rfq', { ...ACCOUNT_ACTIONS, quantity: '1', withdrawal_address: 'bc1qexample' }],
    ] as const) {
      const res = await client.send('HEAD', path, { query });
      assert.equal(res.status, 404, `HEAD ${path}`);
    }
    assert.equal(await quotes(), before);
  });

  test('a pair without a price → 400 naming the field', async () => {
    const res = await client.send('GET', '/liquidity/rfq', {
      query: { side: 'buy', underlying: 'DOGE', quoted_currency: 'USD', quantity: '1' },
    });
    assert.equal(res.status, 400);
    assert.deepEqual(res.body, { errors: ['underlying: no price for DOGE/USD'] });
    // A currency nothing is priced in is the quoted currency's fault (probe: it blamed the underlying).
    const unquoted = await client.send('GET', '/liquidity/rfq', {
      query: { side: 'buy', underlying: 'BTC', quoted_currency: 'XYZ', quantity: '1' },
    });
    assert.equal(unquoted.status, 400);
    assert.deepEqual(unquoted.body, { errors: ['quoted_currency: no price for BTC/XYZ'] });
  });

  test('an asset on a network no one knows → 400 naming underlying, in quotes and in booked trades; a known one is quoted', async () => {
    const message =
      'underlying: BTC.NOPE is not an asset on a network this service knows (e.g. USDC.ETH; or the asset alone, e.g. USDC)';
    const liquidity = await client.send('GET', '/liquidity/rfq', {
      query: { side: 'buy', underlying: 'BTC.NOPE', quoted_currency: 'USD', quantity: '1' },
    });
    assert.equal(liquidity.status, 400);
    assert.deepEqual(liquidity.body, { errors: [message] });
    const withdraw = await client.send('POST', '/convert_withdraw/rfq', {
      body: {
        side: 'buy',
        underlying: 'BTC.NOPE',
        quoted_currency: 'USD',
        quantity: '1',
        withdrawal_address: 'anything',
      },
    });
    assert.equal(withdraw.status, 400);
    assert.deepEqual(withdraw.body, { errors: [message] });
    const booked = await svc.admin
      .post('/trades', {
        platform_code: platformCode,
        participant_code: customer,
        side: 'buy',
        underlying: 'BTC.NOPE',
        quoted_currency: 'USD',
        quantity: '1',
        price: '1',
      })
      .then(
        () => assert.fail('booked'),
        (error: AdminApiError) => error,
      );
    assert.equal(booked.status, 400);
    assert.deepEqual(booked.body, { errors: [message] });
    // A network the vendor lists is quoted at the asset's own price (the ledger holds the asset without it).
    const known = await liquidityQuote(client, {
      ...ACCOUNT_ACTIONS,
      underlying: 'ETH.ARBITRUM',
      quantity: '2',
    });
    assert.equal(known.underlying, 'ETH.ARBITRUM');
    assert.equal(known.price, '3');
    // And so is a fund asset of this service's own (funding's ETH.ETH).
    const funded = await liquidityQuote(client, { ...ACCOUNT_ACTIONS, underlying: 'ETH.ETH', quantity: '2' });
    assert.equal(funded.price, '3');
  });

  test('decimals are exact where binary floats are not', async () => {
    // 0.2 × 1.1 is 0.22000000000000003 in floats; 1e-9 × 98765432.123456789 is 0.09876543212345679.
    await setPrices(svc, { 'ETH/USD': '1.1' });
    const small = await liquidityQuote(client, {
      side: 'buy',
      underlying: 'ETH',
      quoted_currency: 'USD',
      quantity: '0.2',
    });
    assert.equal(small.total_notional, '0.22');
    const tiny = await liquidityQuote(client, {
      side: 'buy',
      underlying: 'XDC',
      quoted_currency: 'USD',
      quantity: '0.000000001',
    });
    assert.equal(tiny.total_notional, '0.098765432123456789');
    await setPrices(svc, { 'ETH/USD': '3' });
  });
});

describe('bad requests name every bad field', () => {
  test('schema problems in a body are listed together', async () => {
    const res = await client.send<{ errors: string[] }>('POST', '/liquidity/rfq', {
      body: {
        side: 'hold',
        underlying: 'btc',
        quoted_currency: 'USD',
        quantity: 1,
        spread: '-5',
        extra: true,
      },
    });
    assert.equal(res.status, 400);
    const fields = res.body.errors.map((e) => e.split(':')[0]).sort();
    assert.deepEqual(fields, ['extra', 'quantity', 'side', 'spread', 'underlying']);
    // The spread's bounds are told, as an amount's are.
    for (const spread of ['10000', '0.00001', '-0']) {
      const refused = await client.send<{ errors: string[] }>('POST', '/liquidity/rfq', {
        body: { side: 'buy', underlying: 'BTC', quoted_currency: 'USD', quantity: '0.01', spread },
      });
      assert.deepEqual(refused.body.errors, [
        'spread: is not in the expected form (spread in basis points, from 0 to 9999.9999, at most 4 decimal places)',
      ]);
    }
  });

  test('an account label of more than 40 characters → 400: the trade would break the vendor’s trade schema', async () => {
    const body = { side: 'buy', underlying: 'BTC', quoted_currency: 'USD', quantity: '0.01' };
    const long = await client.send<{ errors: string[] }>('POST', '/liquidity/rfq', {
      body: { ...body, account_label: 'l'.repeat(41) },
    });
    assert.equal(long.status, 400);
    assert.match(long.body.errors.join(), /^account_label: /);
    const fits = await client.send('POST', '/liquidity/rfq', {
      body: { ...body, account_label: 'l'.repeat(40) },
    });
    assert.equal(fits.status, 201, JSON.stringify(fits.body));
    // Balances recorded under a longer label before the bound stay within the operator's reach (a new one there
    // is refused: no request of the platform could move it).
    const credit = () =>
      svc.operatorCall('POST', '/balances', {
        participant_code: customer,
        account_label: 'l'.repeat(60),
        asset: 'USD',
        amount: '1',
      });
    assert.equal((await credit()).status, 400);
    await svc.runtime.store.db
      .insertInto('balance_accounts')
      .values({
        account_id: crypto.randomUUID(),
        platform_code: platformCode,
        participant_code: customer,
        account_group: platformCode,
        account_label: 'l'.repeat(60),
        account_type: 'available',
        asset: 'USD',
      })
      .execute();
    const operator = await svc.operatorCall('POST', '/balances', {
      participant_code: customer,
      account_label: 'l'.repeat(60),
      asset: 'USD',
      amount: '1',
    });
    assert.equal(operator.status, 200, operator.text);
  });

  test('a query string is checked the same way', async () => {
    const res = await client.send<{ errors: string[] }>('GET', '/liquidity/rfq', {
      // `commission` is the vendor's (accepted, a basis-point string); `bonus` is nobody's.
      query: { side: 'buy', underlying: 'BTC', quantity: '1.5x', commission: '5%', bonus: '5' },
    });
    assert.equal(res.status, 400);
    const fields = res.body.errors.map((e) => e.split(':')[0]).sort();
    assert.deepEqual(fields, ['bonus', 'commission', 'quantity', 'quoted_currency']);
  });

  test('business rules: exactly one of quantity and total, positive amounts, distinct assets, known participant', async () => {
    const other = await svc.newPlatform();
    const foreign = await svc.newParticipant(other.platform.platform_code);
    const neither = await client.send<{ errors: string[] }>('POST', '/liquidity/rfq', {
      body: {
        side: 'buy',
        underlying: 'USD',
        quoted_currency: 'USD',
        participant_code: foreign.participant_code,
      },
    });
    assert.equal(neither.status, 400);
    assert.deepEqual(neither.body.errors.map((e) => e.split(':')[0]).sort(), [
      'participant_code',
      'quantity',
      'quoted_currency',
    ]);
    const both = await client.send<{ errors: string[] }>('POST', '/liquidity/rfq', {
      body: { ...ACCOUNT_ACTIONS, quantity: '0', total: '5' },
    });
    assert.equal(both.status, 400);
    assert.deepEqual(both.body.errors.map((e) => e.split(':')[0]).sort(), ['quantity', 'total']);
  });

  test('an amount out of its form is refused with the form, bounds included', async () => {
    for (const value of ['1000000000000', '1.0000000000000000001']) {
      const res = await client.send<{ errors: string[] }>('GET', '/liquidity/rfq', {
        query: { ...ACCOUNT_ACTIONS, total: value },
      });
      assert.equal(res.status, 400, value);
      assert.deepEqual(res.body.errors, [
        'total: is not in the expected form (positive decimal string, at most 12 digits before the point and 18 after, 30 characters in all)',
      ]);
    }
  });

  test('an amount asked for is at most 30 characters, refused as such (not as a computed amount too large at the price)', async () => {
    for (const field of ['quantity', 'total'] as const) {
      const res = await client.send<{ errors: string[] }>('POST', '/liquidity/rfq', {
        body: { ...ACCOUNT_ACTIONS, [field]: '999999999999.999999999999999999' },
      });
      assert.equal(res.status, 400);
      assert.deepEqual(res.body.errors, [`${field}: must NOT have more than 30 characters`]);
    }
  });
});

describe('execution', () => {
  test('books one accepted trade whose client_trade_id is the quote_id; balances move only at settlement', async () => {
    const quote = await liquidityQuote(client, {
      ...ACCOUNT_ACTIONS,
      quantity: '0.5',
      participant_code: customer,
    });
    const res = await client.send<{ message: { trade_id: string } }>('POST', '/liquidity/execute', {
      body: { quote_id: quote.quote_id },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assertVendorSchema(res.body, 'PostExecuteQuoteResponse');
    const execution = await executeLiquidity(
      client,
      (await liquidityQuote(client, { ...ACCOUNT_ACTIONS, quantity: '1' })).quote_id,
    );
    assert.equal(execution.status, 'Completed');

    const found = await tradesByClientTradeId(client, quote.quote_id);
    assert.equal(found.length, 1);
    assert.equal(found[0]!.trade_id, res.body.message.trade_id);
    const trade = await getTrade(client, res.body.message.trade_id);
    assert.equal(trade.client_trade_id, quote.quote_id);
    assert.equal(trade.trade_state, 'accepted');
    assert.equal(trade.trade_price, BTC_USD);
    assert.equal(trade.trade_quantity, '0.5');
    assert.equal(trade.total_notional, '32500.125');
    assert.deepEqual(
      trade.parties.map((p) => [p.side, p.participant_code, p.asset, p.amount]),
      [
        ['buy', customer, 'BTC', '0.5'],
        ['sell', 'SVCLQD', 'USD', '32500.125'],
      ],
    );
    assert.equal(await balanceOf(svc, customer, 'USD'), '10000000');
    assert.equal(await balanceOf(svc, customer, 'BTC'), '0');
  });

  test('a quote_id sent upper-case executes, and spec 7.2 finds its trade with the id as sent', async () => {
    // A UUID is case-insensitive and some platforms store them upper-case (SQL Server): the look-up after a
    // lost answer must find the trade with the id the platform has, or it reads "expired" and trades again.
    const quote = await liquidityQuote(client, {
      ...ACCOUNT_ACTIONS,
      quantity: '0.1',
      participant_code: customer,
    });
    const upper = quote.quote_id.toUpperCase();
    const execution = await executeLiquidity(client, upper);
    for (const id of [upper, quote.quote_id]) {
      const found = await tradesByClientTradeId(client, id);
      assert.deepEqual(
        found.map((t) => [t.trade_id, t.client_trade_id]),
        [[execution.trade_id, quote.quote_id]],
        id,
      );
    }
  });

  test('insufficient balance → 400; funds promised to unsettled trades count; the quote stays executable', async () => {
    const poor = (await svc.newParticipant(platformCode)).participant_code;
    await fund(svc, poor, 'USD', '100');
    const first = await liquidityQuote(client, {
      side: 'buy',
      underlying: 'ETH',
      quoted_currency: 'USD',
      quantity: '20',
      participant_code: poor,
    });
    const second = await liquidityQuote(client, {
      side: 'buy',
      underlying: 'ETH',
      quoted_currency: 'USD',
      quantity: '20',
      participant_code: poor,
    });
    await executeLiquidity(client, first.quote_id); // 60 of 100 promised
    const refused = await client.send<{ errors: string[] }>('POST', '/liquidity/execute', {
      body: { quote_id: second.quote_id },
    });
    assert.equal(refused.status, 400);
    assert.match(refused.body.errors[0]!, /^quote_id: insufficient balance: USD .* has 40 .* needs 60$/);
    assert.deepEqual(await tradesByClientTradeId(client, second.quote_id), []);
    const sells = await client.send('POST', '/liquidity/execute', {
      body: {
        quote_id: (
          await liquidityQuote(client, {
            side: 'sell',
            underlying: 'ETH',
            quoted_currency: 'USD',
            quantity: '1',
            participant_code: poor,
          })
        ).quote_id,
      },
    });
    assert.equal(sells.status, 400, 'selling ETH the participant does not have');

    await fund(svc, poor, 'USD', '20');
    const executed = await executeLiquidity(client, second.quote_id);
    assert.equal((await tradesByClientTradeId(client, second.quote_id))[0]!.trade_id, executed.trade_id);
  });

  test('concurrent executions of different quotes cannot promise the same funds twice', async () => {
    const saver = (await svc.newParticipant(platformCode)).participant_code;
    await fund(svc, saver, 'USD', '100');
    const quotes = await Promise.all(
      Array.from({ length: 10 }, () =>
        liquidityQuote(client, {
          side: 'buy',
          underlying: 'ETH',
          quoted_currency: 'USD',
          quantity: '10',
          participant_code: saver,
        }),
      ),
    );
    const answers = await Promise.all(
      quotes.map((q) => client.send('POST', '/liquidity/execute', { body: { quote_id: q.quote_id } })),
    );
    const statuses = answers.map((a) => a.status).sort();
    // 30 USD each from 100: three fit.
    assert.deepEqual(statuses, [200, 200, 200, 400, 400, 400, 400, 400, 400, 400]);
  });

  test('unknown, expired, executed, foreign and wrong-kind quotes → 404 {"error":"Not Found"}', async () => {
    await expectNotFound('0b1c2d3e-0000-4000-8000-000000000000');
    await expectNotFound('not-a-uuid');

    const executed = await liquidityQuote(client, { ...ACCOUNT_ACTIONS, quantity: '0.001' });
    await executeLiquidity(client, executed.quote_id);
    await expectNotFound(executed.quote_id);

    const other = await svc.newPlatform();
    const foreign = await liquidityQuote(other.client, { ...ACCOUNT_ACTIONS, quantity: '0.001' });
    await expectNotFound(foreign.quote_id);
    const liquidity = await liquidityQuote(client, { ...ACCOUNT_ACTIONS, quantity: '0.001' });
    await expectNotFound(liquidity.quote_id, '/convert_withdraw/execute');

    const justInTime = await liquidityQuote(client, { ...ACCOUNT_ACTIONS, quantity: '0.001' });
    const late = await liquidityQuote(client, { ...ACCOUNT_ACTIONS, quantity: '0.001' });
    clock.advance(29_999);
    await executeLiquidity(client, justInTime.quote_id);
    clock.advance(1);
    await expectNotFound(late.quote_id);
    // spec 7.2: after a 404, GET /trades?client_trade_id=<quote_id> tells "expired" (none) from "executed".
    assert.deepEqual(await tradesByClientTradeId(client, late.quote_id), []);
    assert.equal((await tradesByClientTradeId(client, justInTime.quote_id)).length, 1);
  });

  test('50 concurrent executes of one quote on two instances → one trade, 49 × 404', async () => {
    let second: Runtime | undefined;
    try {
      second = await startInstance(svc, { clock });
      const { platform, key } = await svc.newPlatform();
      const clients = [svc.url, second.url!].map(
        (baseUrl) =>
          new SvcClient({
            baseUrl,
            apiKey: key.api_key,
            apiSecret: key.api_secret,
            passphrase: key.passphrase,
            now: () => clock.now(),
          }),
      );
      await fund(svc, platform.platform_code, 'USD', '1000000');
      const quote = await liquidityQuote(clients[0]!, { ...ACCOUNT_ACTIONS, quantity: '1' });
      const answers = await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          clients[i % 2]!.send('POST', '/liquidity/execute', { body: { quote_id: quote.quote_id } }),
        ),
      );
      const statuses = answers.map((a) => a.status);
      assert.equal(statuses.filter((s) => s === 200).length, 1, statuses.join(','));
      assert.equal(statuses.filter((s) => s === 404).length, 49, statuses.join(','));
      const trades = await svc.runtime.store.db
        .selectFrom('trades')
        .select('trade_id')
        .where('quote_id', '=', quote.quote_id)
        .execute();
      assert.equal(trades.length, 1);
      assert.equal((await tradesByClientTradeId(clients[1]!, quote.quote_id)).length, 1);
    } finally {
      await second?.close();
    }
  });

  test('a retry arriving after expiry while the first execute is still booking waits for it: 404 then finds the trade', async () => {
    // The claim's UPDATE filtered the quote by expiry on its snapshot: once expired, a retry skipped the row
    // instead of waiting for the execute holding it, answered 404 while GET /trades?client_trade_id found none
    // (spec 7.2's "expired": the client requotes), and the first execute then booked its trade: two trades,
    // the money spent twice (fuzz).
    const db = svc.runtime.store.db;
    const { platform, client: own } = await svc.newPlatform();
    const holder = (await svc.newParticipant(platform.platform_code)).participant_code;
    await fund(svc, holder, 'USD', '1000');
    const quote = await liquidityQuote(own, {
      ...ACCOUNT_ACTIONS,
      quantity: '0.001',
      participant_code: holder,
    });
    // The first execute claims the quote, then stalls on the holder's balance row, held here.
    let releaseBalance!: () => void;
    const balanceReleased = new Promise<void>((resolve) => (releaseBalance = resolve));
    let holderPid!: (pid: number) => void;
    const balanceLocked = new Promise<number>((resolve) => (holderPid = resolve));
    const holding = db.transaction().execute(async (trx) => {
      const { rows } = await sql<{ pid: number }>`
        select pg_backend_pid() as pid from balance_accounts
        where participant_code = ${holder} and asset = 'USD' for update`.execute(trx);
      holderPid(rows[0]!.pid);
      await balanceReleased;
    });
    const holder_pid = await balanceLocked;
    // Sessions waiting for the holder (the first execute), and for those (the retry): this test's, no other's.
    const waiting = async (behind: 'holder' | 'first') =>
      Number(
        (
          await sql<{ n: number }>`
            select count(*)::int as n from pg_stat_activity a
            where ${behind === 'holder'}
              and ${holder_pid}::int = any (pg_blocking_pids(a.pid))
               or ${behind === 'first'} and exists (
                select 1 from pg_stat_activity b
                where ${holder_pid}::int = any (pg_blocking_pids(b.pid)) and b.pid = any (pg_blocking_pids(a.pid)))`.execute(
            db,
          )
        ).rows[0]!.n,
      );
    const first = own.send('POST', '/liquidity/execute', { body: { quote_id: quote.quote_id } });
    await eventually('the first execute waiting for the balance', async () =>
      (await waiting('holder')) >= 1 ? true : undefined,
    );
    clock.advance(30_001); // the quote has expired meanwhile
    try {
      const retry = own.send('POST', '/liquidity/execute', { body: { quote_id: quote.quote_id } });
      const retryState = await Promise.race([
        retry.then(() => 'answered'),
        eventually('the retry waiting for the quote', async () =>
          (await waiting('first')) >= 1 ? 'waiting' : undefined,
        ).catch(() => 'neither'),
      ]);
      assert.equal(
        retryState,
        'waiting',
        'the retry waits for the execute under way, rather than answering 404',
      );
      releaseBalance();
      await holding;
      assert.equal((await first).status, 200);
      assert.equal((await retry).status, 404);
      // spec 7.2: the 404 is followed by a look-up, which finds the trade: executed, not expired.
      const trades = await tradesByClientTradeId(own, quote.quote_id);
      assert.equal(trades.length, 1);
      // Made when its claim found the quote unexpired, not when it got the balance (probe: after expire_ts).
      const { transaction_timestamp: madeAt, accepted_timestamp: acceptedAt } = trades[0]!;
      assert.ok(madeAt < quote.expire_ts, `made ${madeAt - quote.expire_ts} ms from the quote's expiry`);
      assert.equal(acceptedAt, madeAt);
    } finally {
      releaseBalance();
      await holding.catch(() => {});
    }
  });

  test('the database refuses a second trade for one quote even if the code tried', async () => {
    const quote = await liquidityQuote(client, { ...ACCOUNT_ACTIONS, quantity: '0.001' });
    const { trade_id: tradeId } = await executeLiquidity(client, quote.quote_id);
    const row = await svc.runtime.store.db
      .selectFrom('trades')
      .selectAll()
      .where('trade_id', '=', tradeId)
      .executeTakeFirstOrThrow();
    await assert.rejects(
      svc.runtime.store.db
        .insertInto('trades')
        .values({ ...row, trade_id: '9c1a3f4e-1111-4111-8111-111111111111', client_trade_id: 'another' })
        .execute(),
      /trades_quote_id_key/,
    );
  });
});
