import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { AdminFundEvent, DepositAddressOwner } from '../../src/contract/funding.schemas.ts';
import { fundQuote, newAccountHolder, recordDeposit, setPrices } from '../helpers/funding-fixtures.ts';
import { startTestService, type PlatformFixture, type TestService } from '../helpers/test-service.ts';

/**
 * Support's lookups (review: "my customer's deposit never showed up" could not be answered without SQL or the
 * platform's key): `GET /admin/deposits` finds every platform's fund events by transaction id, in any of the forms a
 * deposit's is taken in, by deposit address or by participant; `GET /admin/deposit_addresses/{address}` says whose
 * an address is.
 */
let svc: TestService;
let platforms: PlatformFixture[];
let btc: { code: string; address: string };
let eth: { code: string; address: string };
const BTC_HASH = 'ab'.repeat(32);
const ETH_HASH = 'cd'.repeat(32);

type Page = {
  message: AdminFundEvent[];
  page: number;
  page_size: number;
  total_pages: number;
  count: number;
};

async function find(query: string): Promise<Page> {
  const res = await svc.operatorCall('GET', `/deposits?${query}`);
  assert.equal(res.status, 200, res.text);
  return res.json as Page;
}

before(async () => {
  svc = await startTestService();
  await setPrices(svc);
  platforms = [await svc.newPlatform(), await svc.newPlatform()];
  const holderOn = async (platform: PlatformFixture, fundAsset: string) => {
    const { code } = await newAccountHolder(svc, platform.platform.platform_code);
    const quote = await fundQuote(platform.client, { participant_code: code, fund_asset: fundAsset });
    return { code, address: quote.deposit_address };
  };
  btc = await holderOn(platforms[0]!, 'BTC.BTC');
  eth = await holderOn(platforms[1]!, 'ETH.ETH');
  await recordDeposit(svc, { deposit_address: btc.address, quantity: '0.5', transaction_id: BTC_HASH });
  await recordDeposit(svc, {
    deposit_address: btc.address,
    quantity: '0.1',
    transaction_id: 'ef'.repeat(32),
  });
  await recordDeposit(svc, {
    deposit_address: eth.address,
    quantity: '2',
    transaction_id: `0x${ETH_HASH.toUpperCase()}`,
  });
});
after(() => svc?.close());

test('by transaction id, written as any network takes it: with or without 0x, in any letter case', async () => {
  for (const written of [BTC_HASH, BTC_HASH.toUpperCase(), `0x${BTC_HASH}`, `0X${BTC_HASH.toUpperCase()}`]) {
    const { message, count } = await find(`transaction_id=${written}`);
    assert.equal(count, 1, written);
    assert.deepEqual(
      [message[0]!.platform_code, message[0]!.participant_code, message[0]!.kind, message[0]!.quantity],
      [platforms[0]!.platform.platform_code, btc.code, 'deposit', '0.5'],
    );
    assert.equal(message[0]!.transaction_id, BTC_HASH);
  }
  const onEthereum = await find(`transaction_id=${ETH_HASH}`);
  assert.deepEqual(
    onEthereum.message.map((e) => [e.platform_code, e.transaction_id]),
    [[platforms[1]!.platform.platform_code, `0x${ETH_HASH}`]],
  );
  assert.deepEqual((await find(`transaction_id=${'00'.repeat(32)}`)).message, []);
});

test('by deposit address (as written in any case a network allows) or participant, newest first, paged', async () => {
  const atAddress = await find(`deposit_address=${btc.address.toUpperCase()}`);
  assert.deepEqual(
    atAddress.message.map((e) => e.quantity),
    ['0.1', '0.5'],
  );
  const ofParticipant = await find(`participant_code=${btc.code}&page_size=1&page=2`);
  assert.deepEqual(
    [ofParticipant.message.map((e) => e.quantity), ofParticipant.count, ofParticipant.total_pages],
    [['0.5'], 2, 2],
  );
  // Each filter given narrows.
  assert.equal((await find(`participant_code=${eth.code}&transaction_id=${BTC_HASH}`)).count, 0);
});

test('refusals name the problem: no filter, an unknown participant, a bad page size or parameter', async () => {
  const refused = async (query: string, status: number, pattern: RegExp) => {
    const res = await svc.operatorCall('GET', `/deposits${query}`);
    assert.equal(res.status, status, res.text);
    assert.match(res.text, pattern);
  };
  await refused('', 400, /query: give at least one of transaction_id, deposit_address, participant_code/);
  await refused('?participant_code=ZZZZZ9', 404, /participant ZZZZZ9 not found/);
  await refused(`?participant_code=${btc.code}&page_size=101`, 400, /page_size/);
  await refused(`?tx=${BTC_HASH}`, 400, /tx: is not allowed/);
});

test('GET /admin/deposit_addresses/{address}: whose an address is; one that is none of ours → 404 naming it', async () => {
  const res = await svc.operatorCall('GET', `/deposit_addresses/${btc.address.toUpperCase()}`);
  assert.equal(res.status, 200, res.text);
  const owner = (res.json as { message: DepositAddressOwner }).message;
  assert.deepEqual(
    [owner.address, owner.platform_code, owner.participant_code, owner.account_label, owner.network],
    [btc.address, platforms[0]!.platform.platform_code, btc.code, 'general', 'BTC'],
  );
  assert.equal(owner.last_fund_asset, 'BTC.BTC');
  const unknown = await svc.operatorCall('GET', '/deposit_addresses/bc1qnotours');
  assert.equal(unknown.status, 404, unknown.text);
  assert.match(unknown.text, /deposit address bc1qnotours not found/);
});
