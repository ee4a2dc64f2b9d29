import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createLocalJWKSet, jwtVerify } from 'jose';
import { runDemo } from '../../src/cli/demo-command.ts';
import { isValidAddress } from '../../src/domain/funding/deposit-addresses.ts';
import { FundingResource, SvcInvalidRequestError, SvcPermissionError } from '../../src/sdk/index.ts';
import { startTestService, type PlatformFixture, type TestService } from '../helpers/test-service.ts';
import { newAccountHolder, recordDeposit, setPrices, txId } from '../helpers/funding-fixtures.ts';

/** The SDK's FundingResource against a real server: one method per funding endpoint. */
let svc: TestService;
let platform: PlatformFixture;
let funding: FundingResource;
before(async () => {
  svc = await startTestService();
  platform = await svc.newPlatform();
  funding = new FundingResource(platform.client);
  await setPrices(svc);
});
after(() => svc?.close());

test('token, JWKS verification and revocation', async () => {
  const { code } = await newAccountHolder(svc, platform.platform.platform_code);
  const { token, deposit_intent_id } = await funding.createClientToken({
    participant_code: code,
    permissions: ['fwc'],
    reference_id: 'sdk',
  });
  assert.ok(deposit_intent_id);
  const { payload } = await jwtVerify(token, createLocalJWKSet(await funding.signingKeys()));
  assert.equal(payload.participant_code, code);
  await funding.revokeClientToken(token);
  await assert.rejects(svc.runtime.services.funding.verifyClientToken(token), /revoked/);
  await assert.rejects(funding.revokeClientToken('nonsense'), SvcInvalidRequestError);
});

test('quote, deposit, then the fund event through listTransactions', async () => {
  const { code } = await newAccountHolder(svc, platform.platform.platform_code);
  const quote = await funding.requestQuote({
    participant_code: code,
    fund_asset: 'ETH.ETH',
    client_fund_id: 'sdk-q',
  });
  const event = await recordDeposit(svc, {
    deposit_address: quote.deposit_address,
    quantity: '1.5',
    transaction_id: txId(),
  });
  const page = await funding.listTransactions({ participant_code: code, success: true, page_size: 10 });
  assert.deepEqual(page.message, [event]);
  assert.equal(page.message[0]!.reference_id, 'sdk-q');
  await assert.rejects(funding.listTransactions({ page_size: 51 }), SvcInvalidRequestError);
  // The deposit timestamp bounds as numbers, as the vendor types them (a fraction too).
  const at = event.deposit_timestamp;
  const around = await funding.listTransactions({
    participant_code: code,
    deposit_timestamp_gte: at - 0.5,
    deposit_timestamp_lte: at,
  });
  assert.deepEqual(around.message, [event]);
  const after = await funding.listTransactions({ participant_code: code, deposit_timestamp_gt: at + 0.25 });
  assert.deepEqual(after.message, []);

  const stranger = await svc.newPlatform();
  await assert.rejects(
    new FundingResource(stranger.client).listTransactions({ fund_id: event.fund_id }),
    SvcPermissionError,
  );
});

test('svc demo shows a fund quote with a deposit address and the command to fund it', async () => {
  const demo = await runDemo(svc.admin);
  const platform = await svc.admin.get<{ ip_allowlist: string[] }>(`/platforms/${demo.platform_code}`);
  assert.deepEqual(platform.ip_allowlist, [], 'open in cert');
  const quote = demo.fund_quote as {
    deposit_address?: string;
    try_a_deposit?: string;
    reference_id?: string;
  };
  assert.ok(quote.deposit_address && isValidAddress('evm', quote.deposit_address), JSON.stringify(quote));
  assert.match(quote.reference_id ?? '', /^demo-/);
  assert.match(quote.try_a_deposit ?? '', /^npx svc deposits record 0x[0-9a-fA-F]{40} 100/);
});

test('svc demo against a prod server gives its platform a loopback allow-list (the server decides, not the CLI)', async () => {
  const prod = await startTestService({ env: { SVC_ENV: 'prod' } });
  try {
    const demo = await runDemo(prod.admin);
    const platform = await prod.admin.get<{ ip_allowlist: string[] }>(`/platforms/${demo.platform_code}`);
    assert.deepEqual(platform.ip_allowlist, ['127.0.0.1/32', '::1/128']);
    assert.match(String((demo.fund_quote as { deposit_address?: string }).deposit_address), /^0x/);
  } finally {
    await prod.close();
  }
});
