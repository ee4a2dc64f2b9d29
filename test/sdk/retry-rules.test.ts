import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import {
  createClient,
  DATA_USED_WITH_DIFFERENT_REQUEST_ID,
  EMAIL_ALREADY_EXISTS,
  SvcConflictError,
  SvcInvalidRequestError,
  SvcNotFoundError,
  SvcServerError,
  type PostCustomerBody,
  type RetryOptions,
  type SvcPlatform,
} from 'svc-platform/sdk';
import { ManualClock } from '../../src/lib/clock.ts';
import { usCustomer } from '../helpers/onboarding-fixtures.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import { fund, setPrices } from '../helpers/trades-fixtures.ts';
import { startLossyProxy, type LossyProxy } from './lossy-proxy.ts';

/**
 * Issue 9 point 4: the SDK's retry rules (spec 7.1–7.3) proven against the real server in cert. Each
 * failure is real: `X-Simulator-Scenario` makes the server fail before the handler (`error_5xx`) or do and
 * commit the work and then answer 502/504 (`error_50x_after`), and the lossy proxy loses a real answer on
 * the wire. A `fetch` wrapper only adds the scenario header to the first sends of a route and records what
 * was sent; the injected sleep records the waits instead of waiting. The database is counted to show that
 * no trade, participant or tenant change is ever made twice, and the caller gets the right result.
 */
const clock = new ManualClock(Date.now());
let svc: TestService;
let proxy: LossyProxy;
let platformCode: string;
let key: { api_key: string; api_secret: string; passphrase: string };

const BUY = { side: 'buy', underlying: 'BTC', quoted_currency: 'USD', quantity: '0.01' } as const;
const CONVERT = { ...BUY, withdrawal_address: 'bc1qexample' } as const;
const EXECUTES = [
  { name: 'liquidity', path: '/liquidity/execute' },
  { name: 'convert_withdraw', path: '/convert_withdraw/execute' },
] as const;

/** `/participants/ada@x.com` → `/participants/{email}`, so recorded sends read the same every run. */
function routeOf(method: string, pathname: string): string {
  const path = pathname
    .replace(/^\/accounts\/[^/]+\/tenants\/[^/]+$/, '/accounts/{zrn}/tenants/{tenant}')
    .replace(/^\/accounts\/[^/]+\//, '/accounts/{zrn}/')
    .replace(/^\/participants\/(?!customers\/)[^/]+$/, '/participants/{email}')
    .replace(/^\/trades\/[^/]+$/, '/trades/{trade_id}');
  return `${method} ${path}`;
}

interface Rehearsal {
  client: SvcPlatform;
  /** "METHOD /route [scenario] → status" per send, in order ("→ lost" when no answer came back). */
  sends: string[];
  /** Every wait the SDK asked for, in ms. */
  slept: number[];
}

/**
 * A client whose first sends of a route carry the given scenarios, one per send, in order; later sends
 * (resends, checks) go out untouched.
 */
function rehearse(
  scenarios: Record<string, string[]> = {},
  retry: RetryOptions = {},
  baseUrl = svc.url,
): Rehearsal {
  const queues = new Map(Object.entries(scenarios).map(([route, list]) => [route, [...list]]));
  const sends: string[] = [];
  const slept: number[] = [];
  const client = createClient({
    baseUrl,
    apiKey: key.api_key,
    apiSecret: key.api_secret,
    passphrase: key.passphrase,
    now: () => clock.now(),
    retry: {
      sleep: async (ms) => {
        slept.push(ms);
      },
      random: () => 0.5,
      ...retry,
    },
    fetch: async (input, init) => {
      const url = new URL(String(input));
      const route = routeOf(init?.method ?? 'GET', url.pathname);
      const scenario = queues.get(route)?.shift();
      const headers = scenario
        ? { ...(init?.headers as Record<string, string>), 'X-Simulator-Scenario': scenario }
        : init?.headers;
      const label = scenario ? `${route} [${scenario}]` : route;
      try {
        const response = await fetch(input, { ...init, headers });
        sends.push(`${label} → ${response.status}`);
        return response;
      } catch (error) {
        sends.push(`${label} → lost`);
        throw error;
      }
    },
  });
  return { client, sends, slept };
}

const db = () => svc.runtime.store.db;

async function tradeIdsOfQuote(quoteId: string): Promise<string[]> {
  const rows = await db().selectFrom('trades').select('trade_id').where('quote_id', '=', quoteId).execute();
  return rows.map((r) => r.trade_id);
}

async function withdrawalsOfTrade(tradeId: string): Promise<number> {
  const rows = await db()
    .selectFrom('withdrawal_requests')
    .selectAll()
    .where('trade_id', '=', tradeId)
    .execute();
  return rows.length;
}

async function participantCodesWithEmail(email: string): Promise<string[]> {
  const rows = await db()
    .selectFrom('participants')
    .select('participant_code')
    .where('platform_code', '=', platformCode)
    .where('email', '=', email)
    .execute();
  return rows.map((r) => r.participant_code);
}

async function tenantChanges(zrn: string, tenant: string): Promise<string[]> {
  const rows = await db()
    .selectFrom('tenant_changes')
    .select('change')
    .where('zrn', '=', zrn)
    .where('participant_code', '=', tenant)
    .orderBy('seq')
    .execute();
  return rows.map((r) => r.change);
}

async function quote(client: SvcPlatform, path: string): Promise<string> {
  return path.startsWith('/liquidity')
    ? (await client.quotes.requestLiquidityQuote(BUY)).quote_id
    : (await client.quotes.requestConvertWithdrawQuote(CONVERT)).quote_id;
}

function execute(client: SvcPlatform, path: string, quoteId: string) {
  return path.startsWith('/liquidity')
    ? client.quotes.executeLiquidityQuote(quoteId)
    : client.quotes.executeConvertWithdrawQuote(quoteId);
}

/** A customer account of a new holder, and an approved participant that may become its tenant. */
async function accountAndTenant(): Promise<{ zrn: string; tenant: string }> {
  const holder = (await svc.newParticipant(platformCode)).participant_code;
  const tenant = (await svc.newParticipant(platformCode)).participant_code;
  const { zrn } = await svc.newCustomerAccount(platformCode, holder);
  return { zrn, tenant };
}

before(async () => {
  svc = await startTestService({ clock });
  proxy = await startLossyProxy(svc.url);
  await setPrices(svc, { 'BTC/USD': '20000' });
  const fixture = await svc.newPlatform();
  platformCode = fixture.platform.platform_code;
  key = fixture.key;
  await fund(svc, platformCode, 'USD', '1000000');
});
after(async () => {
  await proxy?.close();
  await svc?.close();
});

describe('spec 7.1.1: a GET is resent on a network error, 502, 503 and 504', () => {
  test('GET /trades failing 502, 503, 504 in turn: resent after each, with the doubling backoff', async () => {
    const { client, sends, slept } = rehearse({ 'GET /trades': ['error_502', 'error_503', 'error_504'] });
    const quoteId = await quote(client, '/liquidity/execute');
    await client.quotes.executeLiquidityQuote(quoteId);
    const trades = await client.trades.list({ client_trade_id: quoteId });
    assert.equal(trades.length, 1);
    assert.deepEqual(sends.slice(2), [
      'GET /trades [error_502] → 502',
      'GET /trades [error_503] → 503',
      'GET /trades [error_504] → 504',
      'GET /trades → 200',
    ]);
    // spec 7.1.4: the first delay in 100–500 ms, then doubling (random() = 0.5: the middle of each window).
    assert.deepEqual(slept, [300, 600, 1200]);
  });

  test("a call's retry options refine the client's: its injected sleep and random still apply", async () => {
    const { client, sends, slept } = rehearse({ 'GET /trades': ['error_503'] });
    const trades = await client.trades.list({}, { retry: { maxRetries: 1 } });
    assert.ok(Array.isArray(trades));
    assert.deepEqual(sends, ['GET /trades [error_503] → 503', 'GET /trades → 200']);
    assert.deepEqual(slept, [300], "the client's sleep (a real one would have waited, unseen)");
  });

  test("a call's retry option given as undefined keeps the client's (maxRetries, sleep)", async () => {
    const { client, sends, slept } = rehearse(
      { 'GET /trades': ['error_503', 'error_503'] },
      { maxRetries: 1 },
    );
    await assert.rejects(
      client.trades.list({}, { retry: { maxRetries: undefined, sleep: undefined } }),
      (error: unknown) => error instanceof SvcServerError && error.status === 503,
    );
    assert.deepEqual(sends, ['GET /trades [error_503] → 503', 'GET /trades [error_503] → 503']);
    assert.deepEqual(slept, [300], "the client's one retry, with its sleep");
  });

  test('GET whose answer is lost on the wire: resent', async () => {
    const { client, sends } = rehearse({}, {}, proxy.url);
    const lostBefore = proxy.lost();
    proxy.loseNextAnswer();
    const time = await client.time();
    assert.equal(proxy.lost(), lostBefore + 1);
    assert.equal(time.epoch, clock.now());
    assert.deepEqual(sends, ['GET /time → lost', 'GET /time → 200']);
  });

  test('the JWKS (unauthenticated, outside the simulator) goes through the same sender: a lost answer is resent', async () => {
    const { client, sends } = rehearse({}, {}, proxy.url);
    proxy.loseNextAnswer();
    assert.ok((await client.funding.signingKeys()).keys.length >= 1);
    assert.deepEqual(sends, ['GET /.well-known/jwks.json → lost', 'GET /.well-known/jwks.json → 200']);
  });
});

describe('spec 7.1.3: a 500 is never retried', () => {
  test('GET 500: SvcServerError at once', async () => {
    const { client, sends, slept } = rehearse({ 'GET /trades': ['error_500'] });
    await assert.rejects(
      client.trades.list(),
      (e: unknown) => e instanceof SvcServerError && e.status === 500,
    );
    assert.deepEqual(sends, ['GET /trades [error_500] → 500']);
    assert.deepEqual(slept, []);
  });

  for (const { name, path } of EXECUTES) {
    test(`${name} execute 500: thrown at once, no check, no trade; the quote is still there to execute`, async () => {
      const { client, sends } = rehearse({ [`POST ${path}`]: ['error_500'] });
      const quoteId = await quote(client, path);
      await assert.rejects(
        execute(client, path, quoteId),
        (e: unknown) => e instanceof SvcServerError && e.status === 500,
      );
      assert.deepEqual(sends.slice(1), [`POST ${path} [error_500] → 500`]);
      assert.deepEqual(await tradeIdsOfQuote(quoteId), []);
      assert.equal((await execute(client, path, quoteId)).outcome, 'executed');
    });
  }

  test('customer creation 500: thrown at once, no look-up, no participant', async () => {
    const { client, sends } = rehearse({ 'POST /participants/customers/new': ['error_500'] });
    const body = usCustomer() as PostCustomerBody;
    await assert.rejects(
      client.participants.createCustomer(body),
      (e: unknown) => e instanceof SvcServerError,
    );
    assert.deepEqual(sends, ['POST /participants/customers/new [error_500] → 500']);
    assert.deepEqual(await participantCodesWithEmail(body.email), []);
  });
});

describe('spec 7.1.2: a POST answered 503 is resent without a check', () => {
  for (const { name, path } of EXECUTES) {
    test(`${name} execute 503: resent at once, one trade`, async () => {
      const { client, sends, slept } = rehearse({ [`POST ${path}`]: ['error_503'] });
      const quoteId = await quote(client, path);
      const result = await execute(client, path, quoteId);
      assert.equal(result.outcome, 'executed');
      assert.deepEqual(sends.slice(1), [`POST ${path} [error_503] → 503`, `POST ${path} → 200`]);
      assert.deepEqual(slept, [300]);
      assert.deepEqual(await tradeIdsOfQuote(quoteId), [result.trade_id]);
    });
  }

  test('customer creation 503: resent at once, one participant', async () => {
    const { client, sends } = rehearse({ 'POST /participants/customers/new': ['error_503'] });
    const body = usCustomer() as PostCustomerBody;
    const result = await client.participants.createCustomer(body);
    assert.equal(result.outcome, 'created');
    assert.deepEqual(sends, [
      'POST /participants/customers/new [error_503] → 503',
      'POST /participants/customers/new → 201',
    ]);
    assert.deepEqual(await participantCodesWithEmail(body.email), [result.participant_code]);
  });

  test('tenant add 503: resent at once, one change', async () => {
    const { zrn, tenant } = await accountAndTenant();
    const { client, sends } = rehearse({ 'POST /accounts/{zrn}/tenants': ['error_503'] });
    assert.deepEqual(await client.accounts.addTenant(zrn, tenant), {});
    assert.deepEqual(sends, [
      'GET /accounts/{zrn}/details → 200',
      'POST /accounts/{zrn}/tenants [error_503] → 503',
      'POST /accounts/{zrn}/tenants → 202',
    ]);
    assert.deepEqual(await tenantChanges(zrn, tenant), ['add']);
  });
});

describe('spec 7.1.2, 7.2: a POST answered 502/504 runs the idempotence check, and is resent only if nothing happened', () => {
  for (const { name, path } of EXECUTES) {
    for (const scenario of ['error_502', 'error_504']) {
      test(`${name} execute ${scenario} (nothing done): GET /trades finds nothing, resent, one trade`, async () => {
        const { client, sends } = rehearse({ [`POST ${path}`]: [scenario] });
        const quoteId = await quote(client, path);
        const result = await execute(client, path, quoteId);
        assert.equal(result.outcome, 'executed');
        assert.equal(result.quote_id, quoteId);
        assert.deepEqual(sends.slice(1), [
          `POST ${path} [${scenario}] → ${scenario.slice(6)}`,
          'GET /trades → 200',
          `POST ${path} → 200`,
        ]);
        assert.deepEqual(await tradeIdsOfQuote(quoteId), [result.trade_id]);
      });
    }
    for (const scenario of ['error_502_after', 'error_504_after']) {
      test(`${name} execute ${scenario} (done, answer lost): the check finds the trade, nothing resent`, async () => {
        const { client, sends } = rehearse({ [`POST ${path}`]: [scenario] });
        const quoteId = await quote(client, path);
        const result = await execute(client, path, quoteId);
        assert.equal(result.outcome, 'found');
        assert.ok(result.outcome === 'found');
        assert.equal(result.trade.client_trade_id, quoteId);
        assert.deepEqual(sends.slice(1), [
          `POST ${path} [${scenario}] → ${scenario.slice(6, 9)}`,
          'GET /trades → 200',
        ]);
        assert.deepEqual(await tradeIdsOfQuote(quoteId), [result.trade_id]);
        if (name === 'convert_withdraw') assert.equal(await withdrawalsOfTrade(result.trade_id), 1);
      });
    }
    test(`${name} execute whose answer is lost on the wire: the check finds the trade`, async () => {
      const { client, sends } = rehearse({}, {}, proxy.url);
      const quoteId = await quote(client, path);
      proxy.loseNextAnswer();
      const result = await execute(client, path, quoteId);
      assert.equal(result.outcome, 'found');
      assert.deepEqual(sends.slice(1), [`POST ${path} → lost`, 'GET /trades → 200']);
      assert.deepEqual(await tradeIdsOfQuote(quoteId), [result.trade_id]);
    });
  }

  test('a client-wide X-Simulator-Scenario rehearses the execute, not its check: the check finds the trade', async () => {
    // ClientOptions.headers is where the SDK's docs suggest a cert run puts the header.
    const seen: string[] = [];
    const client = createClient({
      baseUrl: svc.url,
      apiKey: key.api_key,
      apiSecret: key.api_secret,
      passphrase: key.passphrase,
      now: () => clock.now(),
      headers: { 'X-Simulator-Scenario': 'error_504_after' },
      retry: { sleep: async () => {}, random: () => 0.5 },
      fetch: async (input, init) => {
        const scenario = (init?.headers as Record<string, string>)['X-Simulator-Scenario'];
        const response = await fetch(input, init);
        seen.push(
          `${routeOf(init?.method ?? 'GET', new URL(String(input)).pathname)} [${scenario ?? ''}] → ${response.status}`,
        );
        return response;
      },
    });
    const quoteId = await quote(rehearse().client, '/liquidity/execute');
    const result = await client.quotes.executeLiquidityQuote(quoteId);
    assert.equal(result.outcome, 'found');
    assert.deepEqual(seen, ['POST /liquidity/execute [error_504_after] → 504', 'GET /trades [] → 200']);
    assert.deepEqual(await tradeIdsOfQuote(quoteId), [result.trade_id]);
  });

  test('execute failing 502 every time: checked after each attempt, gives up after maxRetries, no trade', async () => {
    const path = '/liquidity/execute';
    const { client, sends, slept } = rehearse({
      [`POST ${path}`]: ['error_502', 'error_502', 'error_502', 'error_502'],
    });
    const quoteId = await quote(client, path);
    await assert.rejects(
      execute(client, path, quoteId),
      (e: unknown) => e instanceof SvcServerError && e.status === 502,
    );
    const attempt = [`POST ${path} [error_502] → 502`, 'GET /trades → 200'];
    assert.deepEqual(sends.slice(1), [...attempt, ...attempt, ...attempt, ...attempt]);
    assert.deepEqual(slept, [300, 600, 1200]);
    assert.deepEqual(await tradeIdsOfQuote(quoteId), []);
  });

  test("an execute's check spends the execute's deadline: it does not wait past it, and the 502 is thrown with its failure", async () => {
    // Review: each look-up had a budget of its own, so a check's waits ran past the call's deadline.
    const path = '/liquidity/execute';
    let now = 0;
    const waits: number[] = [];
    const retry = {
      deadlineMs: 500,
      now: () => now,
      sleep: async (ms: number) => {
        waits.push(ms);
        now += ms;
      },
    };
    const { client, sends } = rehearse({
      [`POST ${path}`]: ['error_503', 'error_502'],
      'GET /trades': ['error_503'],
    });
    const quoteId = await quote(client, path);
    await assert.rejects(
      client.quotes.executeLiquidityQuote(quoteId, { retry }),
      (e: unknown) =>
        e instanceof SvcServerError &&
        e.status === 502 &&
        e.checkError instanceof SvcServerError &&
        e.checkError.status === 503,
    );
    assert.deepEqual(sends.slice(1), [
      `POST ${path} [error_503] → 503`,
      `POST ${path} [error_502] → 502`,
      'GET /trades [error_503] → 503',
    ]);
    // 300 ms after the 503; the check's own 300 would have ended at 600, past the execute's 500.
    assert.deepEqual(waits, [300]);
    assert.deepEqual(await tradeIdsOfQuote(quoteId), []);
  });

  for (const scenario of ['error_502', 'error_504']) {
    test(`customer creation ${scenario} (nothing done): the look-up by email finds no one, resent, one participant`, async () => {
      const { client, sends } = rehearse({ 'POST /participants/customers/new': [scenario] });
      const body = usCustomer() as PostCustomerBody;
      const result = await client.participants.createCustomer(body);
      assert.equal(result.outcome, 'created');
      assert.deepEqual(sends, [
        `POST /participants/customers/new [${scenario}] → ${scenario.slice(6)}`,
        'GET /participants/{email} → 404',
        'POST /participants/customers/new → 201',
      ]);
      assert.deepEqual(await participantCodesWithEmail(body.email), [result.participant_code]);
    });
  }
  for (const scenario of ['error_502_after', 'error_504_after']) {
    test(`customer creation ${scenario} (created, answer lost): the look-up finds the customer, nothing resent`, async () => {
      const { client, sends } = rehearse({ 'POST /participants/customers/new': [scenario] });
      const body = usCustomer() as PostCustomerBody;
      const result = await client.participants.createCustomer(body, { requestId: randomUUID() });
      assert.equal(result.outcome, 'found');
      assert.ok(result.outcome === 'found');
      assert.equal(result.participant.email, body.email);
      assert.deepEqual(sends, [
        `POST /participants/customers/new [${scenario}] → ${scenario.slice(6, 9)}`,
        'GET /participants/{email} → 200',
      ]);
      assert.deepEqual(await participantCodesWithEmail(body.email), [result.participant_code]);
    });
  }
  test('customer creation whose answer is lost on the wire: the look-up finds the customer', async () => {
    const { client, sends } = rehearse({}, {}, proxy.url);
    const body = usCustomer() as PostCustomerBody;
    proxy.loseNextAnswer();
    const result = await client.participants.createCustomer(body);
    assert.equal(result.outcome, 'found');
    assert.deepEqual(sends, ['POST /participants/customers/new → lost', 'GET /participants/{email} → 200']);
    assert.deepEqual(await participantCodesWithEmail(body.email), [result.participant_code]);
  });

  for (const scenario of ['error_502', 'error_504', 'error_502_after', 'error_504_after']) {
    const done = scenario.endsWith('_after');
    test(`tenant add ${scenario}: the details ${done ? 'show it accepted, nothing resent' : 'show nothing, resent'}`, async () => {
      const { zrn, tenant } = await accountAndTenant();
      const { client, sends } = rehearse({ 'POST /accounts/{zrn}/tenants': [scenario] });
      assert.deepEqual(await client.accounts.addTenant(zrn, tenant), {});
      assert.deepEqual(sends, [
        'GET /accounts/{zrn}/details → 200', // what the check compares with
        `POST /accounts/{zrn}/tenants [${scenario}] → ${scenario.slice(6, 9)}`,
        'GET /accounts/{zrn}/details → 200',
        ...(done ? [] : ['POST /accounts/{zrn}/tenants → 202']),
      ]);
      assert.deepEqual(await tenantChanges(zrn, tenant), ['add']);
    });
    test(`tenant remove ${scenario}: the details ${done ? 'show it accepted, nothing resent' : 'show nothing, resent'}`, async () => {
      const { zrn, tenant } = await accountAndTenant();
      const { client, sends } = rehearse({ 'DELETE /accounts/{zrn}/tenants/{tenant}': [scenario] });
      await client.accounts.addTenant(zrn, tenant);
      await svc.runtime.services.tenants.applyPending(platformCode, zrn);
      assert.deepEqual(await client.accounts.removeTenant(zrn, tenant), {});
      assert.deepEqual(sends.slice(2), [
        'GET /accounts/{zrn}/details → 200',
        `DELETE /accounts/{zrn}/tenants/{tenant} [${scenario}] → ${scenario.slice(6, 9)}`,
        'GET /accounts/{zrn}/details → 200',
        ...(done ? [] : ['DELETE /accounts/{zrn}/tenants/{tenant} → 202']),
      ]);
      assert.deepEqual(await tenantChanges(zrn, tenant), ['add', 'remove']);
    });
  }

  for (const scenario of ['error_502', 'error_504']) {
    test(`tenant changes the server would refuse, answered ${scenario} first: resent and refused, not reported accepted`, async () => {
      const { zrn, tenant } = await accountAndTenant();
      const stranger = (await svc.newParticipant(platformCode)).participant_code;
      const { client, sends } = rehearse({
        'POST /accounts/{zrn}/tenants': ['', scenario],
        'DELETE /accounts/{zrn}/tenants/{tenant}': [scenario],
      });
      assert.deepEqual(await client.accounts.addTenant(zrn, tenant), {});
      await svc.runtime.services.tenants.applyPending(platformCode, zrn);
      // Added already: the check does not take the tenant for this call's work; the resend gets the 409.
      await assert.rejects(client.accounts.addTenant(zrn, tenant), (e: unknown) => {
        return e instanceof SvcConflictError && e.outcomeUnknown !== true;
      });
      // Never a tenant: "not among the tenants" is not a removal; the resend gets the 404.
      await assert.rejects(client.accounts.removeTenant(zrn, stranger), (e: unknown) => {
        return e instanceof SvcNotFoundError && e.outcomeUnknown !== true;
      });
      // The details read before each call said the change would be refused: nothing to check, one resend.
      assert.deepEqual(sends.slice(2), [
        'GET /accounts/{zrn}/details → 200',
        `POST /accounts/{zrn}/tenants [${scenario}] → ${scenario.slice(6, 9)}`,
        'POST /accounts/{zrn}/tenants → 409',
        'GET /accounts/{zrn}/details → 200',
        `DELETE /accounts/{zrn}/tenants/{tenant} [${scenario}] → ${scenario.slice(6, 9)}`,
        'DELETE /accounts/{zrn}/tenants/{tenant} → 404',
      ]);
      assert.deepEqual(await tenantChanges(zrn, tenant), ['add']);
      assert.deepEqual(await tenantChanges(zrn, stranger), []);
    });
  }

  test('a POST with no idempotence check (POST /fund/rfq) answered 502: returned to the caller, not resent', async () => {
    const { client, sends } = rehearse({ 'POST /fund/rfq': ['error_502'] });
    const participant = (await svc.newParticipant(platformCode)).participant_code;
    await assert.rejects(
      client.funding.requestQuote({ participant_code: participant, fund_asset: 'USDC.ETH' }),
      (e: unknown) => e instanceof SvcServerError && e.status === 502,
    );
    assert.deepEqual(sends, ['POST /fund/rfq [error_502] → 502']);
  });
});

describe('spec 7.2: execute answered 404', () => {
  for (const { name, path } of EXECUTES) {
    test(`${name}: a quote this client executed already → GET /trades finds the trade`, async () => {
      const { client, sends } = rehearse();
      const quoteId = await quote(client, path);
      const first = await execute(client, path, quoteId);
      const again = await execute(client, path, quoteId);
      assert.equal(again.outcome, 'found');
      assert.equal(again.trade_id, first.trade_id);
      assert.deepEqual(sends.slice(2), [`POST ${path} → 404`, 'GET /trades → 200']);
      assert.deepEqual(await tradeIdsOfQuote(quoteId), [first.trade_id]);
    });

    test(`${name}: an expired quote → no trade found → SvcNotFoundError, or a new quote when allowed`, async () => {
      const { client, sends } = rehearse();
      const expired = await quote(client, path);
      clock.advance(30_000);
      await assert.rejects(execute(client, path, expired), SvcNotFoundError);
      assert.deepEqual(sends.slice(1), [`POST ${path} → 404`, 'GET /trades → 200']);

      // quoteAndExecute: the first quote expires between quote and execute; re-quoting is opt-in.
      const rfq = path.replace('execute', 'rfq');
      const expiring = rehearse();
      let quotes = 0;
      const expireFirstQuote = createClient({
        ...expiring.client.http.options,
        fetch: async (input, init) => {
          const response = await expiring.client.http.options.fetch!(input, init);
          if (new URL(String(input)).pathname === rfq && quotes++ === 0) clock.advance(30_000);
          return response;
        },
      });
      const quoteAndExecute = (retry: RetryOptions) =>
        path.startsWith('/liquidity')
          ? expireFirstQuote.quotes.quoteAndExecuteLiquidity(BUY, { retry })
          : expireFirstQuote.quotes.quoteAndExecuteConvertWithdraw(CONVERT, { retry });
      const noWait = { sleep: async () => {}, random: () => 0.5 };
      await assert.rejects(quoteAndExecute(noWait), SvcNotFoundError);
      quotes = 0;
      expiring.sends.length = 0;
      const result = await quoteAndExecute({ ...noWait, allowRequote: true });
      assert.equal(result.outcome, 'executed');
      assert.deepEqual(expiring.sends, [
        `GET ${rfq} → 200`,
        `POST ${path} → 404`,
        'GET /trades → 200',
        `GET ${rfq} → 200`,
        `POST ${path} → 200`,
      ]);
      assert.deepEqual(await tradeIdsOfQuote(result.quote_id), [result.trade_id]);
    });
  }

  test('re-quoting is bounded: when every quote expires, it stops after maxRequotes', async () => {
    const expiring = rehearse();
    const alwaysExpired = createClient({
      ...expiring.client.http.options,
      fetch: async (input, init) => {
        const response = await expiring.client.http.options.fetch!(input, init);
        if (new URL(String(input)).pathname === '/liquidity/rfq') clock.advance(30_000);
        return response;
      },
    });
    await assert.rejects(
      alwaysExpired.quotes.quoteAndExecuteLiquidity(BUY, {
        retry: { sleep: async () => {}, allowRequote: true, maxRequotes: 2 },
      }),
      SvcNotFoundError,
    );
    assert.equal(expiring.sends.filter((s) => s.startsWith('GET /liquidity/rfq')).length, 3);
    assert.equal(expiring.sends.filter((s) => s.startsWith('POST /liquidity/execute')).length, 3);
  });
});

describe('spec 7.3: customer creation answered a conflict 400', () => {
  test('same payload, no X-REQUEST-ID: the look-up returns the existing customer (`exists`)', async () => {
    const { client, sends } = rehearse();
    const body = usCustomer() as PostCustomerBody;
    const first = await client.participants.createCustomer(body);
    const again = await client.participants.createCustomer(body);
    assert.deepEqual(again, {
      outcome: 'exists',
      participant_code: first.participant_code,
      participant: { participant_code: first.participant_code, email: body.email },
      conflict: DATA_USED_WITH_DIFFERENT_REQUEST_ID,
    });
    assert.deepEqual(sends, [
      'POST /participants/customers/new → 201',
      'POST /participants/customers/new → 400',
      'GET /participants/{email} → 200',
    ]);
    assert.deepEqual(await participantCodesWithEmail(body.email), [first.participant_code]);
  });

  test('other data for an existing email: `exists` with the conflict, one participant', async () => {
    const { client } = rehearse();
    const body = usCustomer() as PostCustomerBody;
    const first = await client.participants.createCustomer(body, { requestId: randomUUID() });
    const other = await client.participants.createCustomer(
      { ...body, last_name: 'Byron' },
      { requestId: randomUUID() },
    );
    assert.equal(other.outcome, 'exists');
    assert.ok(other.outcome === 'exists');
    assert.equal(other.conflict, EMAIL_ALREADY_EXISTS);
    assert.equal(other.participant_code, first.participant_code);
    assert.deepEqual(await participantCodesWithEmail(body.email), [first.participant_code]);
  });

  test('a format 400 is not spec 7.3: thrown with every bad field, no look-up', async () => {
    const { client, sends } = rehearse();
    const body = { ...usCustomer(), citizenship_code: 'XX' } as PostCustomerBody;
    await assert.rejects(
      client.participants.createCustomer(body),
      (e: unknown) =>
        e instanceof SvcInvalidRequestError && e.errors.some((m) => m.startsWith('citizenship_code: ')),
    );
    assert.deepEqual(sends, ['POST /participants/customers/new → 400']);
    assert.deepEqual(await participantCodesWithEmail(body.email), []);
  });
});

describe('no duplicates under concurrency', () => {
  test('20 identical customer creations at once: one participant; one `created`, the rest `exists` of it', async () => {
    const { client } = rehearse();
    const body = usCustomer() as PostCustomerBody;
    const results = await Promise.all(
      Array.from({ length: 20 }, () => client.participants.createCustomer(body)),
    );
    const codes = await participantCodesWithEmail(body.email);
    assert.equal(codes.length, 1);
    assert.deepEqual(new Set(results.map((r) => r.participant_code)), new Set(codes));
    assert.equal(results.filter((r) => r.outcome === 'created').length, 1);
    assert.equal(results.filter((r) => r.outcome === 'exists').length, 19);
  });

  test('10 executions of one quote at once, each sent with error_504_after: one trade, every caller gets it', async () => {
    const path = '/liquidity/execute';
    const { client } = rehearse({ [`POST ${path}`]: Array.from({ length: 10 }, () => 'error_504_after') });
    const quoteId = await quote(client, path);
    const results = await Promise.all(Array.from({ length: 10 }, () => execute(client, path, quoteId)));
    const trades = await tradeIdsOfQuote(quoteId);
    assert.equal(trades.length, 1);
    assert.deepEqual(new Set(results.map((r) => r.trade_id)), new Set(trades));
    assert.ok(results.every((r) => r.outcome === 'found'));
  });
});
