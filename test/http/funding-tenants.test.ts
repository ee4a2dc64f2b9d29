import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { CustomerAccountDetails } from '../../src/contract/accounts.schemas.ts';
import { Dec } from '../../src/lib/decimal.ts';
import { startTestService, type PlatformFixture, type TestService } from '../helpers/test-service.ts';
import {
  clientToken,
  eventually,
  fundQuote,
  newAccountHolder,
  recordDeposit,
  setPrices,
  txId,
  usdBalance,
} from '../helpers/funding-fixtures.ts';

/**
 * Issue 6 point 7 with issue 5: a tenant of a customer account funds it as its primary holder can (spec 2.1:
 * identical permissions). The tenant is added and removed through the public API (POST and DELETE
 * /accounts/{zrn}/tenants), which applies the change in the background, so the worker runs here.
 */
let svc: TestService;
let platform: PlatformFixture;
let holder: string;
let tenant: string;
let zrn: string;
before(async () => {
  svc = await startTestService({ env: { SVC_ROLE: 'all' } });
  platform = await svc.newPlatform();
  await setPrices(svc);
  const account = await newAccountHolder(svc, platform.platform.platform_code, 'joint');
  holder = account.code;
  zrn = account.zrn;
  tenant = (await svc.newParticipant(platform.platform.platform_code)).participant_code;
});
after(() => svc?.close());

/** Whose balance a fund event credited (its account's holder; null when it credited none). */
const ownerOf = async (fundId: string) =>
  (
    await svc.runtime.store.db
      .selectFrom('fund_events')
      .select('owner_participant_code')
      .where('fund_id', '=', fundId)
      .executeTakeFirstOrThrow()
  ).owner_participant_code;

const details = () =>
  platform.client
    .request<{ message: CustomerAccountDetails }>('GET', `/accounts/${encodeURIComponent(zrn)}/details`)
    .then((r) => r.message);

test('a tenant opens funding sessions and gets a deposit address; its deposits fund the primary holder’s account', async () => {
  const added = await platform.client.send('POST', `/accounts/${encodeURIComponent(zrn)}/tenants`, {
    body: { participant_code: tenant },
  });
  assert.equal(added.status, 202, JSON.stringify(added.body));
  await eventually(async () => (await details()).tenants.includes(tenant), 'the tenant to take effect');

  const { deposit_intent_id } = await clientToken(platform.client, {
    participant_code: tenant,
    reference_id: 'tenant-widget',
    deposit_details: { account_label: 'joint' },
  });
  assert.ok(deposit_intent_id);
  const tenantQuote = await fundQuote(platform.client, {
    participant_code: tenant,
    fund_asset: 'USDC.ETH',
    account_label: 'joint',
    client_fund_id: 'tenant-rfq',
  });
  const holderQuote = await fundQuote(platform.client, {
    participant_code: holder,
    fund_asset: 'USDC.ETH',
    account_label: 'joint',
    client_fund_id: 'holder-rfq',
  });
  assert.notEqual(tenantQuote.deposit_address, holderQuote.deposit_address, 'addresses are per participant');

  const byTenant = await recordDeposit(svc, {
    deposit_address: tenantQuote.deposit_address,
    quantity: '100',
    transaction_id: txId(),
  });
  assert.equal(byTenant.success, true, byTenant.status_reason);
  assert.equal(byTenant.participant_code, tenant);
  assert.equal(byTenant.account_label, 'joint');
  assert.equal(byTenant.reference_id, 'tenant-rfq', "the tenant's own most recent session");
  const byHolder = await recordDeposit(svc, {
    deposit_address: holderQuote.deposit_address,
    quantity: '50',
    transaction_id: txId(),
  });
  assert.equal(byHolder.reference_id, 'holder-rfq');

  // Both credits land on the primary holder's account; the tenant has no balance of its own there.
  assert.equal(await usdBalance(svc, holder, 'joint'), '150');
  assert.equal(await usdBalance(svc, tenant, 'joint'), undefined);
  assert.equal(await ownerOf(byTenant.fund_id), holder);

  // An operator's credit and debit naming the tenant with the label move the holder's account too: the credit
  // went to a row of the tenant's own under the label, which no request of the platform could reach.
  const adjust = (amount: string) =>
    svc.operatorCall('POST', '/balances', {
      participant_code: tenant,
      account_label: 'joint',
      asset: 'USD',
      amount,
    });
  const credited = await adjust('5');
  assert.equal(credited.status, 200, credited.text);
  const { message } = credited.json as { message: { participant_code: string; balance: string } };
  assert.equal(message.participant_code, holder, 'the account moved is the holder’s');
  assert.equal(message.balance, '155');
  assert.equal((await adjust('-2.5')).status, 200);
  assert.equal(await usdBalance(svc, holder, 'joint'), '152.5');
  assert.equal(await usdBalance(svc, tenant, 'joint'), undefined);
});

test('once removed, the former tenant is refused (403) and a deposit to its old address credits nothing', async () => {
  const { deposit_address } = await fundQuote(platform.client, {
    participant_code: tenant,
    fund_asset: 'BTC.BTC',
    account_label: 'joint',
  });
  // The service runs on the real clock: a deposit made now is made while the tenancy is in effect.
  const whileTenant = Date.now();
  const removed = await platform.client.send(
    'DELETE',
    `/accounts/${encodeURIComponent(zrn)}/tenants/${tenant}`,
  );
  assert.equal(removed.status, 202, JSON.stringify(removed.body));
  await eventually(async () => !(await details()).tenants.includes(tenant), 'the removal to take effect');

  const quote = await platform.client.send('POST', '/fund/rfq', {
    body: { participant_code: tenant, fund_asset: 'BTC.BTC', account_label: 'joint' },
  });
  assert.equal(quote.status, 403);
  // The body's faults come first (wire-contract §9: input, then who acts; review).
  const badAsset = await platform.client.send<{ errors: string[] }>('POST', '/fund/rfq', {
    body: { participant_code: tenant, fund_asset: 'XRP.XRP', account_label: 'joint' },
  });
  assert.equal(badAsset.status, 400, JSON.stringify(badAsset.body));
  assert.match(badAsset.body.errors.join('\n'), /^fund_asset: /m);
  const token = await platform.client.send('POST', '/client_auth_token', {
    body: { participant_code: tenant, permissions: ['fwc'], deposit_details: { account_label: 'joint' } },
  });
  assert.equal(token.status, 403);

  const before = await usdBalance(svc, holder, 'joint');
  const late = await recordDeposit(svc, { deposit_address, quantity: '0.5', transaction_id: txId() });
  assert.equal(late.success, false);
  assert.match(late.status_reason, /no longer a tenant/);
  assert.equal(await usdBalance(svc, holder, 'joint'), before);

  // A deposit made while it was a tenant and reported after the removal (a slow indexer, or one that waited
  // behind the participant's other deposits) funds the account it was made for, as its funding reference is
  // the session's at that time (probe: it was refused as "no longer a tenant" and credited no one).
  const madeBefore = await recordDeposit(svc, {
    deposit_address,
    quantity: '0.5',
    transaction_id: txId(),
    deposit_timestamp: whileTenant,
  });
  assert.equal(madeBefore.success, true, madeBefore.status_reason);
  assert.equal(madeBefore.deposit_timestamp, whileTenant);
  const credited = await usdBalance(svc, holder, 'joint');
  assert.equal(
    new Dec(credited!).minus(before!).toFixed(),
    new Dec(madeBefore.notional).minus(madeBefore.deposit_fee_notional || 0).toFixed(),
    "the holder's account is credited the deposit",
  );
  assert.equal(await ownerOf(madeBefore.fund_id), holder);
  assert.equal(await usdBalance(svc, tenant, 'joint'), undefined);

  // The operator's adjustment naming the former tenant with the label is refused too, naming why.
  const adjusted = await svc.operatorCall('POST', '/balances', {
    participant_code: tenant,
    account_label: 'joint',
    asset: 'USD',
    amount: '1',
  });
  assert.equal(adjusted.status, 400, adjusted.text);
  assert.match(adjusted.text, /participant_code: participant \w+ is no longer a tenant of account/);
  assert.equal(await usdBalance(svc, tenant, 'joint'), undefined);

  // Once the former tenant opened an account of its own under the label, a late report of a deposit made while it
  // was a tenant still funds the account it was made for; one made now funds its own (review: it went to its own).
  await svc.newCustomerAccount(platform.platform.platform_code, tenant, 'joint');
  const lateReport = await recordDeposit(svc, {
    deposit_address,
    quantity: '0.1',
    transaction_id: txId(),
    deposit_timestamp: whileTenant,
  });
  assert.equal(lateReport.success, true, lateReport.status_reason);
  assert.equal(await ownerOf(lateReport.fund_id), holder);
  const now = await recordDeposit(svc, { deposit_address, quantity: '0.1', transaction_id: txId() });
  assert.equal(now.success, true, now.status_reason);
  assert.equal(await ownerOf(now.fund_id), tenant);
});

test('a tenant named at the account’s creation: its deposit made before its removal funds the account', async () => {
  // Probe: a creation writes no tenant change for the tenants it makes, and the history of the tenancy was read from
  // the tenant changes alone: such a deposit was refused as "no longer a tenant" and credited no one, where one of a
  // tenant added later (the test above) funded the account.
  const code = platform.platform.platform_code;
  const creator = (await svc.newParticipant(code)).participant_code;
  const named = (await svc.newParticipant(code)).participant_code;
  const created = await platform.client.send('POST', '/accounts', {
    body: {
      participant_code: creator,
      account_label: 'family',
      type: 'jtwros',
      tier: 'pro',
      tenants: [named],
    },
  });
  assert.equal(created.status, 202, JSON.stringify(created.body));
  const request = await svc.runtime.store.db
    .selectFrom('customer_account_requests')
    .select('zrn')
    .where('participant_code', '=', creator)
    .where('account_label', '=', 'family')
    .executeTakeFirstOrThrow();
  const accountDetails = () =>
    platform.client
      .send<{ message: CustomerAccountDetails }>(
        'GET',
        `/accounts/${encodeURIComponent(request.zrn)}/details`,
      )
      .then((r) => (r.status === 200 ? r.body.message : undefined));
  await eventually(
    async () => (await accountDetails())?.tenants.includes(named),
    'the account to be created',
  );
  const { deposit_address } = await fundQuote(platform.client, {
    participant_code: named,
    fund_asset: 'USDC.ETH',
    account_label: 'family',
  });
  const whileTenant = Date.now();
  const removed = await platform.client.send(
    'DELETE',
    `/accounts/${encodeURIComponent(request.zrn)}/tenants/${named}`,
  );
  assert.equal(removed.status, 202, JSON.stringify(removed.body));
  await eventually(
    async () => !(await accountDetails())!.tenants.includes(named),
    'the removal to take effect',
  );

  const madeBefore = await recordDeposit(svc, {
    deposit_address,
    quantity: '10',
    transaction_id: txId(),
    deposit_timestamp: whileTenant,
  });
  assert.equal(madeBefore.success, true, madeBefore.status_reason);
  assert.equal(await ownerOf(madeBefore.fund_id), creator);
  assert.equal(
    await usdBalance(svc, creator, 'family'),
    new Dec(madeBefore.notional).minus(madeBefore.deposit_fee_notional || 0).toFixed(),
  );
  // One made now is refused, as any of a former tenant.
  const madeNow = await recordDeposit(svc, { deposit_address, quantity: '10', transaction_id: txId() });
  assert.equal(madeNow.success, false);
  assert.match(madeNow.status_reason, /no longer a tenant/);
});

test('a former tenant is refused a token for experiences on the account, not one for experiences on none', async () => {
  // Probe: a profile or onboarding token, which names no account, was refused with a 403 about the account the
  // participant had left (the default label's).
  const code = platform.platform.platform_code;
  const other = await newAccountHolder(svc, code, 'general');
  const former = (await svc.newParticipant(code)).participant_code;
  const path = `/accounts/${encodeURIComponent(other.zrn)}/tenants`;
  const tenantsOf = async () =>
    (
      await platform.client.request<{ message: CustomerAccountDetails }>(
        'GET',
        `/accounts/${encodeURIComponent(other.zrn)}/details`,
      )
    ).message.tenants;
  assert.equal(
    (await platform.client.send('POST', path, { body: { participant_code: former } })).status,
    202,
  );
  await eventually(async () => (await tenantsOf()).includes(former), 'the tenant to take effect');
  assert.equal((await platform.client.send('DELETE', `${path}/${former}`)).status, 202);
  await eventually(async () => !(await tenantsOf()).includes(former), 'the removal to take effect');

  for (const permissions of [['participant-profile'], ['onboarding']]) {
    const { token, deposit_intent_id } = await clientToken(platform.client, {
      participant_code: former,
      permissions,
    });
    assert.ok(token, String(permissions));
    assert.equal(deposit_intent_id, undefined, 'no funding session');
  }
  // A token for an experience that acts on the account is refused as any request naming it (review): funding, a
  // withdrawal from it, or one that names no label (the default's).
  for (const body of [
    { permissions: ['fwc'] },
    { permissions: ['crypto-buy'] },
    {
      permissions: ['crypto-withdrawals'],
      withdrawal_details: {
        quoted_asset: 'USD',
        withdrawal_request_amount: '1',
        external_account_id: 'x',
        account_label: 'general',
      },
    },
    // Buying on the default account, the withdrawal named from another: the default's is checked too (review).
    {
      permissions: ['crypto-buy', 'crypto-withdrawals'],
      withdrawal_details: {
        quoted_asset: 'USD',
        withdrawal_request_amount: '1',
        external_account_id: 'x',
        account_label: 'savings',
      },
    },
  ]) {
    const refused = await platform.client.send('POST', '/client_auth_token', {
      body: { participant_code: former, ...body },
    });
    assert.equal(refused.status, 403, `${JSON.stringify(body)}: ${JSON.stringify(refused.body)}`);
  }
  // The participant itself is still checked: one of no platform's is unknown.
  const unknown = await platform.client.send('POST', '/client_auth_token', {
    body: { participant_code: 'ZZZZZZ', permissions: ['participant-profile'] },
  });
  assert.equal(unknown.status, 400, JSON.stringify(unknown.body));
});
