import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { FundEvent } from '../../src/contract/funding.schemas.ts';
import { isValidAddress } from '../../src/domain/funding/deposit-addresses.ts';
import { startTestService, type PlatformFixture, type TestService } from '../helpers/test-service.ts';
import { assertOtherPlatformForbidden } from '../helpers/ownership.ts';
import { fundQuote, newAccountHolder, postDeposit, setPrices, txId } from '../helpers/funding-fixtures.ts';

/**
 * Deposit addresses are named in the case their network gives them meaning: an EVM address (`0x` + 40 hex
 * digits) is one account in any letter case, and a bech32 address is all lower or all upper case (BIP-173).
 * The service issues EVM addresses in EIP-55 mixed case; a chain indexer or a platform that lower-cases them
 * still names the same address, and every answer shows the address as issued. Base58 (Solana) is
 * case-sensitive and stays so.
 */
let svc: TestService;
let owner: PlatformFixture;
let other: PlatformFixture;
before(async () => {
  svc = await startTestService();
  owner = await svc.newPlatform();
  other = await svc.newPlatform();
  await setPrices(svc);
});
after(() => svc?.close());

interface Page {
  message: FundEvent[];
}

async function listByAddress(client: PlatformFixture['client'], address: string) {
  return client.send<Page>('GET', '/fund/transactions', { query: { deposit_address: address } });
}

/** Flips the case of every letter: a spelling of the address that matches no stored text exactly. */
function swapCase(text: string): string {
  return [...text].map((c) => (c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase())).join('');
}

test('an EVM deposit address in lower, upper or swapped case is the issued address: deposit and filter find it', async () => {
  const { code } = await newAccountHolder(svc, owner.platform.platform_code);
  const issued = (await fundQuote(owner.client, { participant_code: code, fund_asset: 'USDC.ETH' }))
    .deposit_address;
  assert.ok(isValidAddress('evm', issued) && issued !== issued.toLowerCase(), `EIP-55 mixed case: ${issued}`);
  const lower = issued.toLowerCase();
  const upper = `0x${issued.slice(2).toUpperCase()}`;
  const swapped = `0x${swapCase(issued.slice(2))}`;

  const first = await postDeposit(svc, { deposit_address: lower, quantity: '10', transaction_id: txId() });
  assert.equal(first.status, 201, JSON.stringify(first.body));
  const event = first.body.message as FundEvent;
  assert.equal(event.deposit_address, issued, 'answered as issued');
  assert.equal(event.participant_code, code);

  const second = await postDeposit(svc, { deposit_address: upper, quantity: '5', transaction_id: txId() });
  assert.equal(second.status, 201, JSON.stringify(second.body));
  assert.equal((second.body.message as FundEvent).deposit_address, issued);

  // The same transaction reported with another spelling of the address is the same fund event (a replay).
  const replay = await postDeposit(svc, {
    deposit_address: swapped,
    quantity: '10',
    transaction_id: event.transaction_id,
  });
  assert.equal(replay.status, 200, JSON.stringify(replay.body));
  assert.equal((replay.body.message as FundEvent).fund_id, event.fund_id);

  for (const spelling of [issued, lower, upper, swapped]) {
    const res = await listByAddress(owner.client, spelling);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.message.length, 2, spelling);
    assert.deepEqual(
      res.body.message.map((e) => e.deposit_address),
      [issued, issued],
    );
  }
});

test("another platform's EVM address is still 403 in any case (wire-contract §9)", async () => {
  const { code } = await newAccountHolder(svc, owner.platform.platform_code);
  const issued = (await fundQuote(owner.client, { participant_code: code, fund_asset: 'ETH.ETH' }))
    .deposit_address;
  for (const spelling of [issued, issued.toLowerCase()]) {
    await assertOtherPlatformForbidden(
      { method: 'GET', path: '/fund/transactions', options: { query: { deposit_address: spelling } } },
      { owner: owner.client, other: other.client },
    );
  }
});

test('a bech32 address in upper case is the issued address; a base58 address is matched exactly', async () => {
  const { code } = await newAccountHolder(svc, owner.platform.platform_code);
  const btc = (await fundQuote(owner.client, { participant_code: code, fund_asset: 'BTC.BTC' }))
    .deposit_address;
  const sol = (await fundQuote(owner.client, { participant_code: code, fund_asset: 'SOL.SOL' }))
    .deposit_address;

  const res = await postDeposit(svc, {
    deposit_address: btc.toUpperCase(),
    quantity: '0.01',
    transaction_id: txId(),
  });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  assert.equal((res.body.message as FundEvent).deposit_address, btc);
  assert.equal((await listByAddress(owner.client, btc.toUpperCase())).body.message.length, 1);

  // Base58 letters of another case are another address: not one of ours.
  const otherSol = swapCase(sol);
  assert.notEqual(otherSol, sol);
  const unknown = await postDeposit(svc, {
    deposit_address: otherSol,
    quantity: '1',
    transaction_id: txId(),
  });
  assert.equal(unknown.status, 404, JSON.stringify(unknown.body));
  assert.equal((await listByAddress(owner.client, otherSol)).body.message.length, 0);
});

test('a string that only looks almost like an EVM address is matched exactly (404, empty list), never a 500', async () => {
  for (const address of ['0x1234', `0X${'a'.repeat(40)}`, `0x${'g'.repeat(40)}`]) {
    const res = await postDeposit(svc, { deposit_address: address, quantity: '1', transaction_id: txId() });
    assert.equal(res.status, 404, `${address}: ${JSON.stringify(res.body)}`);
    const listed = await listByAddress(owner.client, address);
    assert.equal(listed.status, 200);
    assert.equal(listed.body.message.length, 0);
  }
});
