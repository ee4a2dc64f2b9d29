import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { base58, bech32 } from '@scure/base';
import {
  depositAddressKey,
  deriveDepositAddress,
  encodeP2wpkh,
  isValidAddress,
  toChecksumAddress,
} from '../../src/domain/funding/deposit-addresses.ts';
import { FUND_ASSETS, parseFundAsset } from '../../src/domain/funding/fund-assets.ts';

/** Issue 6 point 2: deposit addresses look like real addresses of their network. */

test('EIP-55 checksums match the EIP test vectors', () => {
  // From EIP-55's own list of test cases.
  for (const address of [
    '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed',
    '0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359',
    '0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB',
    '0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb',
  ]) {
    assert.equal(toChecksumAddress(address.slice(2).toLowerCase()), address);
  }
});

test('bech32 P2WPKH matches the BIP-173 test vector', () => {
  const program = Buffer.from('751e76e8199196d454941c45d1b3a323f1433bd6', 'hex');
  assert.equal(encodeP2wpkh(program), 'bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4');
});

test('derived addresses are deterministic for the same secret and slot, different otherwise, and valid', () => {
  const key = depositAddressKey(randomBytes(32));
  const otherKey = depositAddressKey(randomBytes(32));
  const slot = { network: 'ETH', participantCode: 'ABC123', accountLabel: 'general' };
  const eth = deriveDepositAddress(key, 'evm', slot);
  assert.equal(deriveDepositAddress(key, 'evm', slot), eth);
  assert.notEqual(deriveDepositAddress(otherKey, 'evm', slot), eth);
  assert.notEqual(deriveDepositAddress(key, 'evm', { ...slot, accountLabel: 'savings' }), eth);
  assert.notEqual(deriveDepositAddress(key, 'evm', { ...slot, participantCode: 'ABC124' }), eth);
  assert.notEqual(deriveDepositAddress(key, 'evm', { ...slot, nonce: 1 }), eth);

  assert.match(eth, /^0x[0-9a-fA-F]{40}$/);
  assert.ok(/[A-F]/.test(eth) && /[a-f]/.test(eth), 'EIP-55 mixes cases');
  assert.ok(isValidAddress('evm', eth));
  assert.ok(!isValidAddress('evm', eth.toLowerCase()), 'the checksum is checked');

  const btc = deriveDepositAddress(key, 'bech32-p2wpkh', { ...slot, network: 'BTC' });
  assert.match(btc, /^bc1q[02-9ac-hj-np-z]{38}$/);
  const decoded = bech32.decode(btc as `${string}1${string}`);
  assert.equal(decoded.words[0], 0);
  assert.equal(bech32.fromWords(decoded.words.slice(1)).length, 20);
  assert.ok(isValidAddress('bech32-p2wpkh', btc));

  const sol = deriveDepositAddress(key, 'solana', { ...slot, network: 'SOL' });
  assert.match(sol, /^[1-9A-HJ-NP-Za-km-z]{32,44}$/);
  assert.equal(base58.decode(sol).length, 32);
  assert.ok(isValidAddress('solana', sol));
});

test('the supported fund assets parse into asset and network; anything else does not', () => {
  for (const fundAsset of FUND_ASSETS) {
    const parsed = parseFundAsset(fundAsset);
    assert.ok(parsed, fundAsset);
    assert.equal(`${parsed.asset}.${parsed.network.network}`, fundAsset);
  }
  for (const other of ['DOGE.DOGE', 'USDC', 'usdc.eth', 'BTC.ETH', ''])
    assert.equal(parseFundAsset(other), null);
});
