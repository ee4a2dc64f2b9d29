import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { AccountsResource } from '../../src/sdk/resources/accounts.ts';
import { startTestService, type PlatformFixture, type TestService } from '../helpers/test-service.ts';
import { fund, liquidityQuote, setPrices, tradesByClientTradeId } from '../helpers/trades-fixtures.ts';

/**
 * Who may trade on an account is checked when a quote is executed, not only when it is made (a quote can be
 * executed for up to 15 minutes), and a tenant acts with its holder's permissions, no more: a locked or
 * closed holder's account is not traded through its tenants.
 */
let svc: TestService;
let platform: PlatformFixture;
let code: string;
before(async () => {
  svc = await startTestService();
  await setPrices(svc, { 'ETH/USD': '3000' });
  platform = await svc.newPlatform();
  code = platform.platform.platform_code;
});
after(() => svc?.close());

const BUY = { side: 'buy', underlying: 'ETH', quoted_currency: 'USD', quantity: '0.01' } as const;

/** Holder H with account "joint" (funded), tenant T in effect. */
async function jointAccount() {
  const holder = (await svc.newParticipant(code)).participant_code;
  const tenant = (await svc.newParticipant(code)).participant_code;
  const { zrn } = await svc.newCustomerAccount(code, holder, 'joint');
  await fund(svc, holder, 'USD', '1000', 'joint');
  const accounts = new AccountsResource(platform.client);
  await accounts.addTenant(zrn, tenant);
  await svc.runtime.services.tenants.applyPending(code, zrn);
  return { holder, tenant, zrn, accounts };
}

/** A quote by `participant` on the account labelled "joint". */
function jointQuote(participant: string) {
  return liquidityQuote(platform.client, { ...BUY, participant_code: participant, account_label: 'joint' });
}

async function execute(quoteId: string) {
  return platform.client.send<{ message?: unknown; errors?: string[] }>('POST', '/liquidity/execute', {
    body: { quote_id: quoteId },
  });
}

test("a tenant's quote is refused at execution once the tenant has been removed: 403, no trade, the quote left as it was", async () => {
  const { tenant, zrn, accounts } = await jointAccount();
  const quote = await jointQuote(tenant);
  await accounts.removeTenant(zrn, tenant);
  await svc.runtime.services.tenants.applyPending(code, zrn);

  const res = await execute(quote.quote_id);
  assert.equal(res.status, 403, JSON.stringify(res.body));
  assert.match(JSON.stringify(res.body), new RegExp(`no longer a tenant of account ${zrn}`));
  assert.deepEqual(await tradesByClientTradeId(platform.client, quote.quote_id), []);
  // Refused again, not "already executed" (404): the claim was rolled back.
  assert.equal((await execute(quote.quote_id)).status, 403);
});

test('a quote is refused at execution once its participant is no longer approved: 400 naming quote_id', async () => {
  const customer = (await svc.newParticipant(code)).participant_code;
  await fund(svc, customer, 'USD', '1000');
  const quote = await liquidityQuote(platform.client, { ...BUY, participant_code: customer });
  const patched = await svc.operatorCall('PATCH', `/participants/${customer}`, { status: 'closed' });
  assert.equal(patched.status, 200);

  const res = await execute(quote.quote_id);
  assert.equal(res.status, 400, JSON.stringify(res.body));
  // wire-contract §3: `<field>: <problem>`, the field the request has (it names only the quote).
  assert.deepEqual(res.body, {
    errors: [`quote_id: participant ${customer} is not approved (status closed)`],
  });
  assert.deepEqual(await tradesByClientTradeId(platform.client, quote.quote_id), []);
});

test("a locked holder's account is not traded through its tenant, neither by a new quote nor by one made before", async () => {
  const { holder, tenant, zrn } = await jointAccount();
  const before = await jointQuote(tenant);
  assert.equal(
    (await svc.operatorCall('PATCH', `/participants/${holder}`, { status: 'locked' })).status,
    200,
  );

  const rfq = await platform.client.send('POST', '/liquidity/rfq', {
    body: { ...BUY, participant_code: tenant, account_label: 'joint' },
  });
  assert.equal(rfq.status, 400, JSON.stringify(rfq.body));
  const holderLocked = new RegExp(
    `the holder ${holder} of account ${zrn} is not approved \\(status locked\\)`,
  );
  assert.match(JSON.stringify(rfq.body), holderLocked);
  const res = await execute(before.quote_id);
  assert.equal(res.status, 400, JSON.stringify(res.body));
  assert.match(JSON.stringify(res.body), holderLocked);
  assert.match(JSON.stringify(res.body), /"quote_id: the holder/);
  assert.deepEqual(await tradesByClientTradeId(platform.client, before.quote_id), []);
});

test("a former tenant's quote request with faulty fields gets the 400 listing them before the 403", async () => {
  const { tenant, zrn, accounts } = await jointAccount();
  await accounts.removeTenant(zrn, tenant);
  await svc.runtime.services.tenants.applyPending(code, zrn);
  const res = await platform.client.send('POST', '/liquidity/rfq', {
    body: { ...BUY, quantity: '0', commission: '1', participant_code: tenant, account_label: 'joint' },
  });
  assert.equal(res.status, 400, JSON.stringify(res.body));
  assert.match(JSON.stringify(res.body), /commission/);
  assert.match(JSON.stringify(res.body), /quantity/);
  // An amount the price makes impossible is a fault of the input too (review: it was the 403).
  const tooSmall = await platform.client.send('POST', '/liquidity/rfq', {
    body: {
      side: 'buy',
      underlying: 'ETH',
      quoted_currency: 'USD',
      total: '0.000000000000000001',
      participant_code: tenant,
      account_label: 'joint',
    },
  });
  assert.equal(tooSmall.status, 400, JSON.stringify(tooSmall.body));
  assert.match(JSON.stringify(tooSmall.body), /"total: too small to buy any of the underlying/);
});

test('a quote made before its participant opened a customer account under the label still executes', async () => {
  const customer = (await svc.newParticipant(code)).participant_code;
  await fund(svc, customer, 'USD', '1000');
  const quote = await liquidityQuote(platform.client, { ...BUY, participant_code: customer });
  await svc.newCustomerAccount(code, customer, 'general');
  const res = await execute(quote.quote_id);
  assert.equal(res.status, 200, JSON.stringify(res.body));
});
