import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { SvcClient } from '../../src/sdk/client.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import {
  executeLiquidity,
  fund,
  liquidityQuote,
  setPrices,
  tradesByClientTradeId,
} from '../helpers/trades-fixtures.ts';

/**
 * Issue 7 point 8, wire-contract §8: in cert, `X-Simulator-Scenario` rehearses spec part 7 on execute.
 * `error_5xx` fail before anything is done (no trade, the quote stays executable); `error_502_after` and
 * `error_504_after` commit the trade and then answer 502/504, the indeterminate case that spec 7.2's
 * idempotence check (GET /trades?client_trade_id=<quote_id>) resolves. In prod the header is ignored.
 */
const SCENARIO = 'X-Simulator-Scenario';
const BTC = { side: 'buy', underlying: 'BTC', quoted_currency: 'USD', quantity: '0.01' } as const;

async function setUp(env: Record<string, string> = {}) {
  const svc = await startTestService({ env });
  await setPrices(svc, { 'BTC/USD': '30000' });
  const { platform, client } = await svc.newPlatform();
  await fund(svc, platform.platform_code, 'USD', '100000');
  return { svc, client };
}

function execute(client: SvcClient, quoteId: string, scenario: string) {
  return client.send('POST', '/liquidity/execute', {
    body: { quote_id: quoteId },
    headers: { [SCENARIO]: scenario },
  });
}

describe('cert', () => {
  let svc: TestService;
  let client: SvcClient;
  before(async () => ({ svc, client } = await setUp()));
  after(() => svc?.close());

  for (const [scenario, status, body] of [
    ['error_500', 500, { error: 'Internal Server Error' }],
    ['error_502', 502, { error: 'Bad Gateway' }],
    ['error_503', 503, { error: 'Service Unavailable' }],
    ['error_504', 504, { error: 'Gateway Timeout' }],
  ] as const) {
    test(`${scenario}: ${status} before anything is done; the quote still executes afterwards`, async () => {
      const quote = await liquidityQuote(client, BTC);
      const res = await execute(client, quote.quote_id, scenario);
      assert.equal(res.status, status);
      assert.deepEqual(res.body, body);
      if (status === 503) assert.equal(res.headers.get('svc-allow-retry'), 'true');
      assert.deepEqual(await tradesByClientTradeId(client, quote.quote_id), []);
      const executed = await executeLiquidity(client, quote.quote_id);
      assert.equal((await tradesByClientTradeId(client, quote.quote_id))[0]!.trade_id, executed.trade_id);
    });
  }

  for (const [scenario, status] of [
    ['error_502_after', 502],
    ['error_504_after', 504],
  ] as const) {
    test(`${scenario}: the trade is committed, then ${status}; the idempotence check finds it and a resend gets 404`, async () => {
      const quote = await liquidityQuote(client, BTC);
      const res = await execute(client, quote.quote_id, scenario);
      assert.equal(res.status, status);
      assert.deepEqual(res.body, { error: status === 502 ? 'Bad Gateway' : 'Gateway Timeout' });
      const found = await tradesByClientTradeId(client, quote.quote_id);
      assert.equal(found.length, 1);
      assert.equal(found[0]!.trade_state, 'accepted');
      const again = await client.send('POST', '/liquidity/execute', { body: { quote_id: quote.quote_id } });
      assert.equal(again.status, 404);
      assert.equal((await tradesByClientTradeId(client, quote.quote_id)).length, 1);
    });
  }

  test('an _after scenario leaves a failed execution as it is (the 404 is not turned into a 502)', async () => {
    const res = await execute(client, '1d2e3f40-6666-4666-8666-666666666666', 'error_502_after');
    assert.equal(res.status, 404);
  });

  test('every POST route: error_503 on POST /liquidity/rfq makes no quote', async () => {
    const count = async () =>
      Number(
        (
          await svc.runtime.store.db
            .selectFrom('quotes')
            .select((eb) => eb.fn.countAll<number>().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      );
    const before = await count();
    const res = await client.send('POST', '/liquidity/rfq', {
      body: BTC,
      headers: { [SCENARIO]: 'error_503' },
    });
    assert.equal(res.status, 503);
    assert.equal(await count(), before);
    const after = await client.send('POST', '/convert_withdraw/rfq', {
      body: { ...BTC, withdrawal_address: 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq' },
      headers: { [SCENARIO]: 'error_504_after' },
    });
    assert.equal(after.status, 504);
    assert.equal(await count(), before + 1);
  });

  test('an unknown scenario → 400 naming the header', async () => {
    const quote = await liquidityQuote(client, BTC);
    const res = await execute(client, quote.quote_id, 'error_418');
    assert.equal(res.status, 400);
    assert.match(JSON.stringify(res.body), /X-Simulator-Scenario: must be one of/);
  });
});

describe('prod', () => {
  let svc: TestService;
  let client: SvcClient;
  before(async () => ({ svc, client } = await setUp({ SVC_ENV: 'prod' })));
  after(() => svc?.close());

  test('the header is ignored: execute does its work and answers 200', async () => {
    for (const scenario of ['error_500', 'error_502_after']) {
      const quote = await liquidityQuote(client, BTC);
      const res = await execute(client, quote.quote_id, scenario);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal((await tradesByClientTradeId(client, quote.quote_id)).length, 1);
    }
  });
});
