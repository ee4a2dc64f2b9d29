import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ManualClock } from '../../src/lib/clock.ts';
import { startTestService, type PlatformFixture, type TestService } from '../helpers/test-service.ts';
import {
  clientToken,
  fundQuote,
  newAccountHolder,
  recordDeposit,
  setPrices,
  txId,
} from '../helpers/funding-fixtures.ts';

/**
 * POST /fund/rfq answers "the rate by which a subsequent on-chain deposit will be honored" (the vendor's
 * words) until its expiry_timestamp: a deposit the quote's session funds, in its asset and account label, by
 * then is credited at the quoted rate, whatever the price source says meanwhile; later ones at the rate then.
 */
const clock = new ManualClock(Date.UTC(2026, 10, 1, 12, 0, 0));
let svc: TestService;
let platform: PlatformFixture;
let code: string;
before(async () => {
  svc = await startTestService({ clock });
  await setPrices(svc); // BTC/USD 65000.25
  platform = await svc.newPlatform();
  code = platform.platform.platform_code;
});
after(() => svc?.close());

const setBtc = (price: string) => svc.admin.post('/prices', { pairs: { 'BTC/USD': price } });

/** The rate a deposit of `quantity` to `address` is credited at. */
async function depositRate(address: string, quantity: string, fundAsset?: string): Promise<string> {
  const event = await recordDeposit(svc, {
    deposit_address: address,
    quantity,
    transaction_id: txId(),
    ...(fundAsset ? { fund_asset: fundAsset } : {}),
  });
  return event.rate;
}

test("a deposit within the quote's expiry is credited at the quoted rate; one after it at the price then", async () => {
  await setBtc('65000.25');
  const { code: customer } = await newAccountHolder(svc, code);
  const quote = await fundQuote(platform.client, { participant_code: customer, fund_asset: 'BTC.BTC' });
  assert.equal(quote.rate, '65000.25');
  await setBtc('60000');
  clock.advance(5_000);
  assert.ok(clock.now() <= quote.expiry_timestamp);
  const honoured = await recordDeposit(svc, {
    deposit_address: quote.deposit_address,
    quantity: '0.5',
    transaction_id: txId(),
  });
  assert.equal(honoured.rate, '65000.25');
  assert.equal(honoured.notional, '32500.125');

  const later = await fundQuote(platform.client, { participant_code: customer, fund_asset: 'BTC.BTC' });
  assert.equal(later.rate, '60000');
  await setBtc('61000');
  clock.advance(later.expiry_timestamp - clock.now() + 1);
  assert.equal(await depositRate(later.deposit_address, '0.5'), '61000', 'past the expiry: the price now');
});

test('each quote holds for its own asset and label; a deposit in an asset no quote was made for is priced now', async () => {
  await setBtc('65000.25');
  const { code: customer } = await newAccountHolder(svc, code);
  await svc.newCustomerAccount(code, customer, 'savings');
  const eth = await fundQuote(platform.client, { participant_code: customer, fund_asset: 'ETH.ETH' });
  const btcSavings = await fundQuote(platform.client, {
    participant_code: customer,
    fund_asset: 'BTC.BTC',
    account_label: 'savings',
  });
  const btcGeneral = await fundQuote(platform.client, { participant_code: customer, fund_asset: 'BTC.BTC' });
  await setBtc('60000');
  clock.advance(1_000);
  // Each quote holds for its own asset and label, though sessions were opened after it.
  assert.equal(await depositRate(btcSavings.deposit_address, '1'), '65000.25');
  assert.equal(await depositRate(btcGeneral.deposit_address, '1'), '65000.25');
  // USDC on the ETH address: no quote was made for it.
  assert.equal(await depositRate(eth.deposit_address, '10', 'USDC.ETH'), '1');
});

test('a quote is honoured even when another session was opened after it: a quote for another asset, an SDK token', async () => {
  await setBtc('65000.25');
  const { code: customer } = await newAccountHolder(svc, code);
  const btc = await fundQuote(platform.client, { participant_code: customer, fund_asset: 'BTC.BTC' });
  await fundQuote(platform.client, { participant_code: customer, fund_asset: 'ETH.ETH' });
  await clientToken(platform.client, { participant_code: customer });
  await setBtc('60000');
  clock.advance(1_000);
  assert.ok(clock.now() <= btc.expiry_timestamp);
  assert.equal(await depositRate(btc.deposit_address, '1'), '65000.25');
});

test("a deposit the quote honours is charged the fee the quote showed, though the platform's fee changed since", async () => {
  // Review: the rate was honoured but the fee was the one in force when the deposit was recorded, so a fee raised
  // within the quote's time charged the end customer more than the quote had shown.
  const setFee = (bps: string) => svc.admin.patch(`/platforms/${code}`, { deposit_fee_bps: bps });
  await setBtc('65000.25');
  await setFee('25');
  try {
    const { code: customer } = await newAccountHolder(svc, code);
    const quote = await fundQuote(platform.client, { participant_code: customer, fund_asset: 'BTC.BTC' });
    assert.equal(quote.deposit_fee_bps, 25);
    await setFee('500');
    clock.advance(1_000);
    /** The rate, fee and fee notional of a deposit of 1 BTC to the quote's address now. */
    const terms = async () => {
      const event = await recordDeposit(svc, {
        deposit_address: quote.deposit_address,
        quantity: '1',
        transaction_id: txId(),
      });
      return [event.rate, event.deposit_fee_bps, event.deposit_fee_notional];
    };
    assert.deepEqual(await terms(), ['65000.25', '25', '162.500625']);
    // Past the quote's expiry: the price and the fee now.
    await setBtc('60000');
    clock.advance(quote.expiry_timestamp - clock.now() + 1);
    assert.deepEqual(await terms(), ['60000', '500', '3000']);
  } finally {
    await setFee('0');
  }
});
