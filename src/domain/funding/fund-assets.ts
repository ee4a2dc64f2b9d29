/**
 * The fund assets this service accepts (spec 4.4: `fund_asset` has the form `<ASSET>.<NETWORK>`). A deposit
 * address is per network (wire-contract §6), so USDC.ETH and ETH.ETH share one address; the network decides
 * the address format (see deposit-addresses.ts). Adding an asset on a listed network is one line here;
 * a new network also needs its address format.
 */
export type AddressFormat = 'bech32-p2wpkh' | 'evm' | 'solana';

export interface FundNetwork {
  network: string;
  format: AddressFormat;
  /** The asset a deposit is taken to be when nothing else says (the network's own coin). */
  nativeAsset: string;
}

export const FUND_NETWORKS: Readonly<Record<string, FundNetwork>> = {
  BTC: { network: 'BTC', format: 'bech32-p2wpkh', nativeAsset: 'BTC.BTC' },
  ETH: { network: 'ETH', format: 'evm', nativeAsset: 'ETH.ETH' },
  SOL: { network: 'SOL', format: 'solana', nativeAsset: 'SOL.SOL' },
};

export const FUND_ASSETS = ['BTC.BTC', 'ETH.ETH', 'USDC.ETH', 'USDT.ETH', 'SOL.SOL', 'USDC.SOL'] as const;
export type FundAsset = (typeof FUND_ASSETS)[number];

/** The currency fund rates and notionals are quoted in (spec 2.2 `quoted_currency`). */
export const QUOTED_CURRENCY = 'USD';

export interface ParsedFundAsset {
  fundAsset: FundAsset;
  /** Spec 2.2 `deposited_asset`: the asset without its network. */
  asset: string;
  network: FundNetwork;
}

export function isFundAsset(value: string): value is FundAsset {
  return (FUND_ASSETS as readonly string[]).includes(value);
}

export function parseFundAsset(value: string): ParsedFundAsset | null {
  if (!isFundAsset(value)) return null;
  const [asset, network] = value.split('.') as [string, string];
  return { fundAsset: value, asset, network: FUND_NETWORKS[network]! };
}
