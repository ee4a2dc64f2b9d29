import { createHmac, hkdfSync } from 'node:crypto';
import { keccak_256 } from '@noble/hashes/sha3.js';
import { base58, bech32 } from '@scure/base';
import type { AddressFormat } from './fund-assets.ts';

/**
 * Deposit addresses (wire-contract §6: stable per participant, account label and network; unique across the
 * service; they look like real addresses of their network). Blockchains are out of scope (DESIGN §1): the
 * service holds no keys for these addresses, so the address bytes are derived deterministically from a server
 * secret and the (network, participant, label) triple, and then encoded exactly as the network does,
 * checksums included, so that wallets and address validators accept them:
 *
 * - BTC: a native SegWit v0 P2WPKH address, bech32 per BIP-173 (`bc1q…`, 20-byte program);
 * - EVM: `0x` + 40 hex digits with the EIP-55 mixed-case checksum (keccak-256);
 * - Solana: base58 of 32 bytes.
 *
 * bech32, base58 and keccak-256 come from @scure/base and @noble/hashes (audited, dependency-free, widely
 * used) rather than our own code. The stored row, not this function, is the source of truth: a collision
 * (never expected with 160+ bits) is resolved by deriving again with the next `nonce`.
 */
const HKDF_INFO = 'svc-platform deposit addresses v1';

export function depositAddressKey(serverSecret: Buffer): Buffer {
  return Buffer.from(hkdfSync('sha256', serverSecret, Buffer.alloc(0), HKDF_INFO, 32));
}

export function deriveDepositAddress(
  key: Buffer,
  format: AddressFormat,
  input: { network: string; participantCode: string; accountLabel: string; nonce?: number },
): string {
  const material = createHmac('sha256', key)
    .update(JSON.stringify([input.network, input.participantCode, input.accountLabel, input.nonce ?? 0]))
    .digest();
  switch (format) {
    case 'bech32-p2wpkh':
      return encodeP2wpkh(material.subarray(0, 20));
    case 'evm':
      return toChecksumAddress(material.subarray(0, 20).toString('hex'));
    case 'solana':
      return base58.encode(material.subarray(0, 32));
  }
}

/** BIP-173: witness version 0 followed by the program in 5-bit words, human-readable part `bc`. */
export function encodeP2wpkh(program: Uint8Array): string {
  return bech32.encode('bc', [0, ...bech32.toWords(program)]);
}

/** EIP-55: a hex digit is upper-case when the matching nibble of keccak-256(lower-case hex) is >= 8. */
export function toChecksumAddress(hex40: string): string {
  const lower = hex40.toLowerCase();
  const hash = Buffer.from(keccak_256(new TextEncoder().encode(lower))).toString('hex');
  let out = '0x';
  for (let i = 0; i < lower.length; i++) {
    out += parseInt(hash[i]!, 16) >= 8 ? lower[i]!.toUpperCase() : lower[i]!;
  }
  return out;
}

const EVM_ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const UPPER_CASE_BECH32 = /^BC1[02-9AC-HJ-NP-Z]+$/;

/**
 * The form an address a caller names (a chain indexer's deposit, a filter) is stored in, where the network
 * does not distinguish letter case: an EVM address (`0x` + 40 hex digits) in any case is the same account, so
 * it is compared in its EIP-55 form, the form this service issues; a bech32 address is all lower or all upper
 * case (BIP-173), and is issued in lower case. Anything else (base58 is case-sensitive) is left as sent.
 */
export function canonicalDepositAddress(address: string): string {
  if (EVM_ADDRESS.test(address)) return toChecksumAddress(address.slice(2));
  if (UPPER_CASE_BECH32.test(address)) return address.toLowerCase();
  return address;
}

/** A transaction id in hex, with or without a `0x` (or `0X`) prefix. */
const HEX_TRANSACTION_ID = /^(0[xX])?([0-9a-fA-F]+)$/;
/** Digits of a transaction hash (32 bytes): Bitcoin's txid, an EVM transaction hash. */
const HASH_DIGITS = 64;
/** The networks whose transaction ids are hex, where letter case makes no difference. */
const HEX_ID_NETWORKS = new Set(['BTC', 'ETH']);

/**
 * The form a deposit's transaction id is stored and compared in, so that an indexer retrying with the hash
 * written another way finds the deposit recorded instead of crediting it again (migrations 0017, 0019). On a
 * network whose transaction ids are hex (Bitcoin, EVM), a hex id is in lower case, and a hash (64 digits) is
 * written as the network does, whatever prefix it came with: `0x` first on EVM, none on Bitcoin (`0xab…`,
 * `AB…` and `0XAB…` were three deposits). A shorter hex id (an operator's own) keeps its prefix, `0X` as
 * `0x`. Anything else (a Solana signature is base58, which is case-sensitive) is left as sent.
 */
export function canonicalTransactionId(network: string, transactionId: string): string {
  const hex = HEX_ID_NETWORKS.has(network) ? HEX_TRANSACTION_ID.exec(transactionId) : null;
  if (!hex) return transactionId;
  const digits = hex[2]!.toLowerCase();
  if (digits.length === HASH_DIGITS) return network === 'ETH' ? `0x${digits}` : digits;
  return hex[1] ? `0x${digits}` : digits;
}

/** Every form a transaction id is stored in on some network (as sent, and its canonical form on each). */
export function transactionIdForms(transactionId: string): string[] {
  return [
    ...new Set([
      transactionId,
      ...[...HEX_ID_NETWORKS].map((network) => canonicalTransactionId(network, transactionId)),
    ]),
  ];
}

/** Whether `address` is well-formed for the format: the check the tests hold every address made here to. */
export function isValidAddress(format: AddressFormat, address: string): boolean {
  try {
    switch (format) {
      case 'bech32-p2wpkh': {
        const { prefix, words } = bech32.decode(address as `${string}1${string}`);
        return prefix === 'bc' && words[0] === 0 && bech32.fromWords(words.slice(1)).length === 20;
      }
      case 'evm':
        return EVM_ADDRESS.test(address) && toChecksumAddress(address.slice(2)) === address;
      case 'solana':
        return base58.decode(address).length === 32;
    }
  } catch {
    return false;
  }
}
