import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { FundQuote } from '../../src/contract/funding.schemas.ts';
import { isValidAddress } from '../../src/domain/funding/deposit-addresses.ts';
import { startTestService, type PlatformFixture, type TestService } from '../helpers/test-service.ts';
import { assertVendorSchema } from '../helpers/vendor-schema.ts';
import { fundQuote, newAccountHolder, setPrices, TEST_PRICES } from '../helpers/funding-fixtures.ts';

/** Issue 6 point 2: POST /fund/rfq (spec 4.4) and deposit addresses (wire-contract §6). */
let svc: TestService;
let owner: PlatformFixture;
let other: PlatformFixture;
before(async () => {
  svc = await startTestService();
  owner = await svc.newPlatform();
  other = await svc.newPlatform();
  await setPrices(svc);
  await svc.runtime.store.db
    .updateTable('platforms')
    .set({ deposit_fee_bps: '12.5' })
    .where('platform_code', '=', owner.platform.platform_code)
    .execute();
});
after(() => svc?.close());

test("answers the vendor's fields, with deposit_address, the price source's rate and reference_id = client_fund_id", async () => {
  const { code } = await newAccountHolder(svc, owner.platform.platform_code);
  const before = Date.now();
  const res = await owner.client.send<{ message: FundQuote }>('POST', '/fund/rfq', {
    body: { participant_code: code, fund_asset: 'USDC.ETH', client_fund_id: 'campaign-7/order-9' },
  });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assertVendorSchema(res.body, 'PostFundRfqResponse');
  const quote = res.body.message;
  assert.equal(quote.participant_code, code);
  assert.equal(quote.fund_asset, 'USDC.ETH');
  assert.equal(quote.rate, TEST_PRICES['USDC/USD']);
  assert.equal(quote.quoted_currency, 'USD');
  assert.equal(quote.reference_id, 'campaign-7/order-9');
  assert.ok(isValidAddress('evm', quote.deposit_address), quote.deposit_address);
  assert.equal(quote.deposit_fee_bps, 12.5);
  assert.equal(quote.deposit_fee_type, 'flat');
  assert.match(quote.request_id, /^[0-9a-f-]{36}$/);
  assert.ok(Number.isInteger(quote.expiry_timestamp) && quote.expiry_timestamp > before);
  // Vendor: account_label is present only when the request supplied one.
  assert.equal('account_label' in quote, false);

  const labelled = await fundQuote(owner.client, {
    participant_code: code,
    fund_asset: 'BTC.BTC',
    account_label: 'general',
  });
  assert.equal(labelled.account_label, 'general');
  assert.equal(labelled.rate, TEST_PRICES['BTC/USD']);
  assert.equal(labelled.reference_id, '', 'no client_fund_id → empty reference');
});

test('deposit addresses are stable per participant, account label and network, unique otherwise, and real-looking', async () => {
  const a = await newAccountHolder(svc, owner.platform.platform_code);
  await svc.newCustomerAccount(owner.platform.platform_code, a.code, 'savings');
  const b = await newAccountHolder(svc, owner.platform.platform_code);
  const c = await newAccountHolder(svc, other.platform.platform_code);
  const q = (client: PlatformFixture['client'], participant: string, asset: string, label?: string) =>
    fundQuote(client, { participant_code: participant, fund_asset: asset, account_label: label }).then(
      (x) => x.deposit_address,
    );

  const ethA = await q(owner.client, a.code, 'ETH.ETH');
  // Stable: again, and for another asset on the same network, and with the default label spelled out.
  assert.equal(await q(owner.client, a.code, 'ETH.ETH'), ethA);
  assert.equal(await q(owner.client, a.code, 'USDC.ETH'), ethA);
  assert.equal(await q(owner.client, a.code, 'USDT.ETH', 'general'), ethA);

  const all = [
    ethA,
    await q(owner.client, a.code, 'ETH.ETH', 'savings'),
    await q(owner.client, a.code, 'BTC.BTC'),
    await q(owner.client, a.code, 'SOL.SOL'),
    await q(owner.client, b.code, 'ETH.ETH'),
    await q(other.client, c.code, 'ETH.ETH'),
  ];
  assert.equal(new Set(all).size, all.length, `unique: ${all.join(', ')}`);
  assert.equal(await q(owner.client, a.code, 'USDC.SOL'), all[3]);

  assert.ok(isValidAddress('evm', all[1]!));
  assert.ok(isValidAddress('bech32-p2wpkh', all[2]!) && all[2]!.startsWith('bc1q'), all[2]);
  assert.ok(isValidAddress('solana', all[3]!), all[3]);

  const stored = await svc.runtime.store.db
    .selectFrom('deposit_addresses')
    .select('address')
    .where('participant_code', '=', a.code)
    .execute();
  assert.equal(stored.length, 4, 'one row per (label, network): ETH general, ETH savings, BTC, SOL');
});

test('an unsupported fund_asset → 400 naming it and listing what is supported', async () => {
  const { code } = await newAccountHolder(svc, owner.platform.platform_code);
  for (const fundAsset of ['DOGE.DOGE', 'BTC.ETH']) {
    const res = await owner.client.send<{ errors: string[] }>('POST', '/fund/rfq', {
      body: { participant_code: code, fund_asset: fundAsset },
    });
    assert.equal(res.status, 400);
    assert.match(
      res.body.errors[0]!,
      new RegExp(`^fund_asset: ${fundAsset.replace('.', '\\.')} is not supported`),
    );
    assert.match(res.body.errors[0]!, /USDC\.ETH/);
  }
});

test('every bad field gets a 400 naming it', async () => {
  const res = await owner.client.send<{ errors: string[] }>('POST', '/fund/rfq', {
    body: {
      participant_code: 'TOOLONG1',
      fund_asset: 'USDC',
      account_label: 'l'.repeat(41),
      client_fund_id: 'c'.repeat(51),
      amount: '10',
    },
  });
  assert.equal(res.status, 400);
  const errors = res.body.errors.join('\n');
  for (const field of ['participant_code', 'fund_asset', 'account_label', 'client_fund_id', 'amount'])
    assert.match(errors, new RegExp(`^${field}: `, 'm'), `${field} in ${errors}`);

  const missing = await owner.client.send<{ errors: string[] }>('POST', '/fund/rfq', { body: {} });
  assert.deepEqual(missing.body.errors.sort(), ['fund_asset: is required', 'participant_code: is required']);

  // Business checks are listed together too: an unknown participant and an unsupported asset.
  const both = await owner.client.send<{ errors: string[] }>('POST', '/fund/rfq', {
    body: { participant_code: 'ZZZZZZ', fund_asset: 'DOGE.DOGE' },
  });
  assert.equal(both.status, 400);
  assert.equal(both.body.errors.length, 2, JSON.stringify(both.body));

  // A reference that could not be stored as sent (a lone surrogate would become U+FFFD, so the deposit's
  // reference_id would not match what was echoed here) is refused, naming it.
  const surrogate = await owner.client.send<{ errors: string[] }>('POST', '/fund/rfq', {
    body: '{"participant_code":"ZZZZZZ","fund_asset":"BTC.BTC","client_fund_id":"x\\ud800y"}',
  });
  assert.equal(surrogate.status, 400);
  assert.deepEqual(surrogate.body.errors, ['client_fund_id: must be well-formed Unicode text']);
});

test("another platform's participant is unknown: 400 naming participant_code (wire-contract §9), and no session or address", async () => {
  const theirs = await newAccountHolder(svc, other.platform.platform_code);
  const res = await owner.client.send<{ errors: string[] }>('POST', '/fund/rfq', {
    body: { participant_code: theirs.code, fund_asset: 'ETH.ETH', client_fund_id: 'steal' },
  });
  assert.equal(res.status, 400);
  assert.match(res.body.errors[0]!, /^participant_code: /);
  const sessions = await svc.runtime.store.db
    .selectFrom('funding_sessions')
    .select('session_id')
    .where('participant_code', '=', theirs.code)
    .execute();
  assert.equal(sessions.length, 0);
});

test('without a price for the asset → 400 naming fund_asset (a configuration gap, not a retryable 503), opening nothing', async () => {
  const fresh = await startTestService();
  try {
    const { platform, client } = await fresh.newPlatform();
    const { code } = await newAccountHolder(fresh, platform.platform_code);
    const res = await client.send<{ errors: string[] }>('POST', '/fund/rfq', {
      body: { participant_code: code, fund_asset: 'SOL.SOL', client_fund_id: 'no-price' },
    });
    assert.equal(res.status, 400, JSON.stringify(res.body));
    assert.deepEqual(res.body.errors, ['fund_asset: no SOL/USD price']);
    assert.equal(res.headers.get('svc-allow-retry'), null);
    const opened = await fresh.runtime.store.db
      .selectFrom('funding_sessions')
      .select('session_id')
      .where('participant_code', '=', code)
      .execute();
    const addresses = await fresh.runtime.store.db
      .selectFrom('deposit_addresses')
      .select('address')
      .where('participant_code', '=', code)
      .execute();
    assert.deepEqual([opened.length, addresses.length], [0, 0]);

    // Listed with the request's other problems, like every business check of this route.
    const both = await client.send<{ errors: string[] }>('POST', '/fund/rfq', {
      body: { participant_code: 'ZZZZZZ', fund_asset: 'BTC.BTC' },
    });
    assert.equal(both.status, 400);
    assert.deepEqual(both.body.errors, [
      'participant_code: participant ZZZZZZ not found',
      'fund_asset: no BTC/USD price',
    ]);
  } finally {
    await fresh.close();
  }
});
