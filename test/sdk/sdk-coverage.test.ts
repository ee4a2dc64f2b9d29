import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import * as byPackageName from 'svc-platform/sdk';
import { createClient, SvcPlatform, type SvcPlatform as Platform } from 'svc-platform/sdk';
import * as bySourcePath from '../../src/sdk/index.ts';
import { usCustomer } from '../helpers/onboarding-fixtures.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import { fund, setPrices } from '../helpers/trades-fixtures.ts';

/**
 * Issue 9 point 1: `import … from 'svc-platform/sdk'` works (package.json `exports` maps `./sdk` to the SDK
 * built into `dist/sdk`, test/e2e/built-package.test.ts, and to its source for the tests; this file imports
 * through the package name), and every public endpoint the server
 * serves (its OpenAPI document, generated from the route schemas) has an SDK method: each method below is
 * called against the real server and must send exactly its endpoint.
 */
let svc: TestService;
let client: Platform;
let sent: string[];

before(async () => {
  svc = await startTestService();
  await setPrices(svc, { 'BTC/USD': '20000', 'USDC/USD': '1' });
});
after(() => svc?.close());

test('the package name gives what the SDK entry point exports', () => {
  // The same module under `npm test` (the svc-platform-source condition), the build in dist/ without it.
  assert.deepEqual(Object.keys(byPackageName).sort(), Object.keys(bySourcePath).sort());
  for (const name of [
    'createClient',
    'SvcPlatform',
    'SvcClient',
    'SvcError',
    'verifyWebhook',
    'RETRY_TABLE',
  ]) {
    assert.ok(name in byPackageName, `svc-platform/sdk exports ${name}`);
  }
});

/** One call per SDK method, in order, and the endpoint each must send (the OpenAPI form of its path). */
async function callEveryMethod(code: string): Promise<string[]> {
  const endpoints: string[] = [];
  /** `readsFirst`: what the method reads before it sends (a tenant change reads the details its check compares with). */
  const call = async (endpoint: string, run: () => Promise<unknown>, readsFirst: string[] = []) => {
    const before = sent.length;
    await run();
    assert.deepEqual(
      sent.slice(before),
      [...readsFirst, endpoint],
      `the SDK method for ${endpoint} sent something else`,
    );
    endpoints.push(endpoint);
  };
  const holder = (await svc.newParticipant(code)).participant_code;
  const tenant = (await svc.newParticipant(code)).participant_code;
  const { zrn } = await svc.newCustomerAccount(code, holder);
  await fund(svc, code, 'USD', '10000');

  await call('GET /time', () => client.time());
  await call('GET /.well-known/jwks.json', () => client.funding.signingKeys());
  await call('GET /accounts', () => client.accounts.list());
  await call('POST /accounts', () =>
    client.accounts.create({
      participant_code: tenant,
      account_label: 'other',
      type: 'individual',
      tier: 'pro',
    }),
  );
  await call('GET /accounts/{zrn}/details', () => client.accounts.details(zrn));
  const details = ['GET /accounts/{zrn}/details'];
  await call('POST /accounts/{zrn}/tenants', () => client.accounts.addTenant(zrn, tenant), details);
  await svc.runtime.services.tenants.applyPending(code, zrn);
  await call(
    'DELETE /accounts/{zrn}/tenants/{tenant}',
    () => client.accounts.removeTenant(zrn, tenant),
    details,
  );
  let token = '';
  await call('POST /client_auth_token', async () => {
    token = (await client.funding.createClientToken({ participant_code: holder, permissions: ['fwc'] }))
      .token;
  });
  await call('POST /revoke_auth_token', () => client.funding.revokeClientToken(token));
  await call('POST /fund/rfq', () =>
    client.funding.requestQuote({ participant_code: holder, fund_asset: 'USDC.ETH' }),
  );
  await call('GET /fund/transactions', () => client.funding.listTransactions());
  const customer = usCustomer();
  await call('POST /participants/customers/new', () =>
    client.participants.createCustomer(customer as byPackageName.PostCustomerBody),
  );
  await call('GET /participants', () => client.participants.list());
  await call('GET /participants/{email}', () => client.participants.getByEmail(String(customer.email)));
  const buy = { side: 'buy', underlying: 'BTC', quoted_currency: 'USD', quantity: '0.01' } as const;
  let quoteId = '';
  await call('GET /liquidity/rfq', async () => {
    quoteId = (await client.quotes.getLiquidityQuote(buy)).quote_id;
  });
  await call('POST /liquidity/rfq', () => client.quotes.requestLiquidityQuote(buy));
  let tradeId = '';
  await call('POST /liquidity/execute', async () => {
    tradeId = (await client.quotes.executeLiquidityQuote(quoteId)).trade_id;
  });
  const convert = { ...buy, withdrawal_address: 'bc1qexample' };
  await call('GET /convert_withdraw/rfq', async () => {
    quoteId = (await client.quotes.getConvertWithdrawQuote(convert)).quote_id;
  });
  await call('POST /convert_withdraw/rfq', () => client.quotes.requestConvertWithdrawQuote(convert));
  await call('POST /convert_withdraw/execute', () => client.quotes.executeConvertWithdrawQuote(quoteId));
  await call('GET /trades', () => client.trades.list());
  await call('GET /trades/{trade_id}', () => client.trades.get(tradeId));
  return endpoints;
}

test('every public endpoint of the OpenAPI document has an SDK method that sends it', async () => {
  const fixture = await svc.newPlatform();
  sent = [];
  client = createClient({
    ...fixture.client.options,
    fetch: async (input, init) => {
      const url = new URL(String(input));
      const path = url.pathname
        .replace(/^\/accounts\/[^/]+\/tenants\/[^/]+$/, '/accounts/{zrn}/tenants/{tenant}')
        .replace(/^\/accounts\/[^/]+\/(details|tenants)$/, '/accounts/{zrn}/$1')
        .replace(/^\/participants\/(?!customers\/)[^/]+$/, '/participants/{email}')
        .replace(/^\/trades\/[^/]+$/, '/trades/{trade_id}');
      sent.push(`${init?.method ?? 'GET'} ${path}`);
      return fetch(input, init);
    },
  });
  assert.ok(client instanceof SvcPlatform);
  const covered = await callEveryMethod(fixture.platform.platform_code);

  const doc = (await (await fetch(`${svc.url}/docs/json`)).json()) as {
    paths: Record<string, Record<string, unknown>>;
  };
  const served = Object.entries(doc.paths)
    .filter(([path]) => !path.startsWith('/admin') && !['/healthz', '/readyz', '/metrics'].includes(path))
    .flatMap(([path, methods]) =>
      Object.keys(methods)
        .filter((m) => ['get', 'post', 'put', 'patch', 'delete'].includes(m))
        .map((m) => `${m.toUpperCase()} ${path}`),
    );
  assert.ok(served.length >= 20, `the OpenAPI document lists the public routes (${served.length})`);
  assert.deepEqual([...covered].sort(), [...new Set(served)].sort());
});
