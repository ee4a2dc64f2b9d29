import { FUND_ASSETS } from '../funding/fund-assets.ts';

/**
 * The assets quoted on a named network (`USDC.ETH`): those the vendor's published underlying currencies name
 * (its `UnderlyingCurrency` and `LiquidityEnabledUnderlyingCurrency` enums). The network decides nothing here, as
 * the ledger holds the asset without it (pricing.ts `ledgerAsset`), but a network no one knows (`BTC.NOPE`) was
 * quoted, booked and settled as if it were real: a withdrawal booked on a chain that does not exist (review).
 * The service's own fund assets (fund-assets.ts) are known too. An asset without a network is any the operator
 * prices.
 */
// prettier-ignore
const VENDOR_NETWORK_ASSETS = [
  'AAVE.ETH', 'APE.ETH', 'ARB.ARBITRUM', 'BAT.ETH', 'BONK.SOL', 'BUSD.ETH', 'COMP.ETH', 'CRV.ETH', 'DAI.ETH',
  'ENA.ETH', 'ENJ.ETH', 'ETH.ARBITRUM', 'ETH.BASE', 'ETH.OPTIMISM', 'ETH.WORLDCHAIN', 'ETH.ZKSYNC', 'EURC.XLM',
  'GALA.ETH', 'GRT.ETH', 'GYEN.ETH', 'INJ.ETH', 'JTO.SOL', 'KNC.ETH', 'LDO.ETH', 'LINK.ETH', 'MANA.ETH',
  'MATIC.ETH', 'MATIC.POLYGON', 'MKR.ETH', 'MORPHO.ETH', 'OMG.ETH', 'ONDO.ETH', 'OP.OPTIMISM', 'PAXG.ETH',
  'PENGU.SOL', 'PEPE.ETH', 'PNUT.SOL', 'PUMP.SOL', 'PYTH.SOL', 'PYUSD.ETH', 'PYUSD.SOL', 'RLUSD.ETH',
  'RLUSD.XRP', 'SAND.ETH', 'SHIB.ETH', 'TRUMP.SOL', 'UNI.ETH', 'USDC.ALGO', 'USDC.APT', 'USDC.ARBITRUM',
  'USDC.AVAX', 'USDC.BASE', 'USDC.BSC', 'USDC.CELO', 'USDC.DOTHUB', 'USDC.ETH', 'USDC.HBAR', 'USDC.MONAD',
  'USDC.OPTIMISM', 'USDC.POLYGON', 'USDC.SEI', 'USDC.SOL', 'USDC.SUI', 'USDC.WORLDCHAIN', 'USDC.XLM',
  'USDC.ZKSYNC', 'USDCX.CANTON', 'USDP.SOL', 'USDT.ARBITRUM', 'USDT.AVAX', 'USDT.BSC', 'USDT.CELO',
  'USDT.DOTHUB', 'USDT.ETH', 'USDT.OPTIMISM', 'USDT.POLYGON', 'USDT.SOL', 'USDT.TRX', 'USDT.XPL', 'W.SOL',
  'WBTC.ETH', 'WIF.SOL', 'WLD.WORLDCHAIN', 'WLFI.ETH', 'ZK.ZKSYNC', 'ZRO.ETH', 'ZRX.ETH', 'ZUSD.ETH',
];
/** And the service's own fund assets (`SOL.SOL`): what a platform funds with, it may quote (review). */
const NETWORK_ASSETS: ReadonlySet<string> = new Set([...VENDOR_NETWORK_ASSETS, ...FUND_ASSETS]);

/**
 * Why the asset `field` names cannot be quoted, booked or looked for as named, or null: an `ASSET.NETWORK` this service
 * does not know (a balance filter's `USDC.XYZ`, `USDC.` and `USDC..ETH` were read as `USDC`: probe).
 */
export function networkAssetProblem(field: string, asset: string): string | null {
  if (!asset.includes('.') || NETWORK_ASSETS.has(asset)) return null;
  return `${field}: ${asset} is not an asset on a network this service knows (e.g. USDC.ETH; or the asset alone, e.g. USDC)`;
}
