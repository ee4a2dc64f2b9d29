import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ManualClock } from '../../src/lib/clock.ts';
import {
  QuotesResource,
  SvcClient,
  SvcInvalidRequestError,
  SvcNotFoundError,
  SvcPermissionError,
  TradesResource,
} from '../../src/sdk/index.ts';
import type { RetryOptions } from '../../src/sdk/backoff.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import { fund, setPrices } from '../helpers/trades-fixtures.ts';

/**
 * The SDK's quotes and trades resources against a real server (issue 7 + spec 7.2): one method per
 * endpoint, and the execute recovery: after a lost answer (502/504) the SDK finds the trade by
 * client_trade_id instead of resending; after a 404 it finds it, or re-quotes when allowed.
 */
const clock = new ManualClock(Date.now());
let svc: TestService;
let platformCode: string;
let key: { api_key: string; api_secret: string; passphrase: string };
let sends: Array<{ method: string; path: string }>;

/** Retries without real waiting. */
const noWait: RetryOptions = { sleep: async () => {}, random: () => 0 };
const BUY = { side: 'buy', underlying: 'BTC', quoted_currency: 'USD', quantity: '0.01' } as const;

/** The platform's client on the test clock, without real waiting, sending through `through`. */
function clientFetching(through: typeof fetch): SvcClient {
  return new SvcClient({
    baseUrl: svc.url,
    apiKey: key.api_key,
    apiSecret: key.api_secret,
    passphrase: key.passphrase,
    now: () => clock.now(),
    retry: noWait,
    fetch: through,
  });
}

/** A client that records every request it sends, and can add a simulator scenario to the first ones. */
function sdk(firstScenarios: string[] = []) {
  const scenarios = [...firstScenarios];
  const client = clientFetching(async (input, init) => {
    const url = new URL(String(input));
    sends.push({ method: init?.method ?? 'GET', path: url.pathname });
    const scenario = url.pathname.endsWith('/execute') ? scenarios.shift() : undefined;
    const headers = scenario
      ? { ...(init?.headers as Record<string, string>), 'X-Simulator-Scenario': scenario }
      : init?.headers;
    return fetch(input, { ...init, headers });
  });
  return { quotes: new QuotesResource(client), trades: new TradesResource(client) };
}

before(async () => {
  svc = await startTestService({ clock });
  await setPrices(svc, { 'BTC/USD': '20000' });
  const fixture = await svc.newPlatform();
  platformCode = fixture.platform.platform_code;
  key = fixture.key;
  await fund(svc, platformCode, 'USD', '100000');
});
after(() => svc?.close());

test('one method per endpoint: RFQs by query and by body, execute, trades list and get', async () => {
  sends = [];
  const { quotes, trades } = sdk();
  const byQuery = await quotes.getLiquidityQuote(BUY);
  const byBody = await quotes.requestLiquidityQuote({ ...BUY, total: '100', quantity: undefined });
  assert.equal(byQuery.total_notional, '200');
  assert.equal(byBody.quantity, '0.005');
  const result = await quotes.executeLiquidityQuote(byQuery.quote_id);
  assert.equal(result.outcome, 'executed');
  assert.equal(result.outcome === 'executed' && result.execution.status, 'Completed');
  const cw = await quotes.getConvertWithdrawQuote({ ...BUY, withdrawal_address: 'bc1qexample' });
  const cwPost = await quotes.requestConvertWithdrawQuote({ ...BUY, withdrawal_address: 'bc1qexample' });
  assert.notEqual(cw.quote_id, cwPost.quote_id);
  const withdrawn = await quotes.executeConvertWithdrawQuote(cw.quote_id);
  assert.ok(withdrawn.outcome === 'executed' && withdrawn.execution.withdrawal_request_id);

  const trade = await trades.get(result.trade_id);
  assert.equal(trade.client_trade_id, byQuery.quote_id);
  assert.deepEqual(
    (await trades.list({ client_trade_id: byQuery.quote_id })).map((t) => t.trade_id),
    [result.trade_id],
  );
  const page = await trades.listPage({ page_size: 1 });
  assert.equal(page.count, 2);
  assert.equal(page.total_pages, 2);
  assert.deepEqual(
    sends.map((s) => `${s.method} ${s.path}`),
    [
      'GET /liquidity/rfq',
      'POST /liquidity/rfq',
      'POST /liquidity/execute',
      'GET /convert_withdraw/rfq',
      'POST /convert_withdraw/rfq',
      'POST /convert_withdraw/execute',
      `GET /trades/${result.trade_id}`,
      'GET /trades',
      'GET /trades',
    ],
  );
  // The timestamp bounds as numbers, as the vendor types them: ms, and ns past 2^53 (printed with an exponent).
  const at = trade.transaction_timestamp;
  const byNumbers = await trades.list({
    'transaction_timestamp[e]': at,
    'transaction_timestamp[gt]': (at - 1) * 1_000_000,
  });
  assert.ok(byNumbers.some((t) => t.trade_id === result.trade_id));
  assert.ok(byNumbers.every((t) => t.transaction_timestamp === at));
  assert.deepEqual(await trades.list({ 'transaction_timestamp[gt]': (at + 1) * 1_000_000 }), []);
});

test('a lost answer (502 after the commit): the SDK finds the trade and does not resend', async () => {
  sends = [];
  const { quotes } = sdk(['error_502_after']);
  const quote = await quotes.requestLiquidityQuote(BUY);
  const result = await quotes.executeLiquidityQuote(quote.quote_id);
  assert.equal(result.outcome, 'found');
  assert.equal(result.outcome === 'found' && result.trade.client_trade_id, quote.quote_id);
  assert.deepEqual(
    sends.map((s) => `${s.method} ${s.path}`),
    ['POST /liquidity/rfq', 'POST /liquidity/execute', 'GET /trades'],
  );
});

test('a 504 before any work: the check finds nothing, so the SDK resends and executes once', async () => {
  sends = [];
  const { quotes, trades } = sdk(['error_504', 'error_503']);
  const quote = await quotes.requestLiquidityQuote(BUY);
  const result = await quotes.executeLiquidityQuote(quote.quote_id);
  assert.equal(result.outcome, 'executed');
  assert.deepEqual(
    sends.map((s) => `${s.method} ${s.path}`),
    [
      'POST /liquidity/rfq',
      'POST /liquidity/execute',
      'GET /trades',
      'POST /liquidity/execute',
      'POST /liquidity/execute',
    ],
  );
  assert.equal((await trades.list({ client_trade_id: quote.quote_id })).length, 1);
});

test('404 for a quote this client already executed: the trade is found', async () => {
  const { quotes } = sdk();
  const quote = await quotes.requestLiquidityQuote(BUY);
  const first = await quotes.executeLiquidityQuote(quote.quote_id);
  const again = await quotes.executeLiquidityQuote(quote.quote_id);
  assert.equal(again.outcome, 'found');
  assert.equal(again.trade_id, first.trade_id);
});

test('404 for an expired quote: SvcNotFoundError, or a new quote when re-quoting is allowed', async () => {
  const { quotes } = sdk();
  const expired = await quotes.requestLiquidityQuote(BUY);
  clock.advance(30_000);
  await assert.rejects(quotes.executeLiquidityQuote(expired.quote_id), SvcNotFoundError);

  // quoteAndExecute: the first quote expires between quote and execute (the 404 is simulated by the clock).
  let quoted = 0;
  const slow = new QuotesResource(
    clientFetching(async (input, init) => {
      const response = await fetch(input, init);
      if (new URL(String(input)).pathname === '/liquidity/rfq' && quoted++ === 0) clock.advance(30_000);
      return response;
    }),
  );
  await assert.rejects(slow.quoteAndExecuteLiquidity(BUY), SvcNotFoundError);
  quoted = 0;
  const requoted = await slow.quoteAndExecuteLiquidity(BUY, { retry: { ...noWait, allowRequote: true } });
  assert.equal(requoted.outcome, 'executed');
  assert.equal(quoted, 2);
});

test('errors map to the status family: insufficient balance 400, another platform’s trade 403', async () => {
  const { quotes, trades } = sdk();
  const poor = (await svc.newParticipant(platformCode)).participant_code;
  const quote = await quotes.requestLiquidityQuote({ ...BUY, participant_code: poor });
  await assert.rejects(quotes.executeLiquidityQuote(quote.quote_id), (error: unknown) => {
    assert.ok(error instanceof SvcInvalidRequestError);
    assert.match(error.errors[0]!, /^quote_id: insufficient balance/);
    return true;
  });
  const other = await svc.newPlatform();
  await fund(svc, other.platform.platform_code, 'USD', '1000');
  const foreign = new QuotesResource(other.client);
  const theirs = await foreign.executeLiquidityQuote((await foreign.requestLiquidityQuote(BUY)).quote_id);
  await assert.rejects(trades.get(theirs.trade_id), SvcPermissionError);
});
